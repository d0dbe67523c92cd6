"""The live feed's reads (dashboard/live/feed.py): the new ExecutionEvent rows by id, and the
events that have no row, those of the executions whose history is told by their columns
(store/history.py), by the executions' updated_at."""

from datetime import datetime
from typing import Any

from django.db.models import Max

from executions import history
from executions.models import Execution, ExecutionEvent, in_states
from executions.states import ExecutionState as S


def latest_event_id() -> int:
    """The newest event's id (a walk of one primary key entry): where a page's live feed starts."""
    return ExecutionEvent.objects.aggregate(top=Max("id"))["top"] or 0


def live_events_after(*, scope: list[int] | None, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """Events with an id above `after`, oldest first, in the caller's scope: a primary key range."""
    events = ExecutionEvent.objects.filter(pk__gt=after)
    if scope is not None:
        events = events.filter(execution__tenant_id__in=scope)
    rows = events.order_by("id").values(
        "id",
        "execution_id",
        "execution__job_id",
        "execution__tenant_id",
        "execution__run_id",
        "from_state",
        "to_state",
        "attempt",
        "at",
        "worker_id",
        "message",
    )[:limit]
    return [
        {
            "id": row["id"],
            "executionId": str(row["execution_id"]),
            "jobId": str(row["execution__job_id"]),
            "tenantId": row["execution__tenant_id"],
            "runId": str(row["execution__run_id"]) if row["execution__run_id"] else None,
            "from": row["from_state"],
            "to": row["to_state"],
            "attempt": row["attempt"],
            "at": row["at"].isoformat(),
            "worker": row["worker_id"],
            "message": row["message"][:200],
        }
        for row in rows
    ]


# The states an execution whose history is derived can be in (store/history.py).
_DERIVED_STATES = (S.PENDING, S.QUEUED, S.RUNNING, S.SUCCEEDED)


def live_derived_since(*, scope: list[int] | None, since: datetime, limit: int = 500) -> list[dict[str, Any]]:
    """The events of the executions whose history is derived (a happy run writes no event row:
    store/history.py) that changed at or after `since`, oldest first, in the caller's scope, as
    `live_events_after` gives the rows' (their `id` None). A range of execution_activity (state,
    updated_at) per state at rest of the happy path, and the QUEUED and RUNNING rows' own indexes
    (executions.models.in_states: a BitmapOr); the newest `limit` executions of the window, so a burst cannot hold
    the feed on old ones (the pages re-read their regions on any change)."""
    executions = Execution.objects.filter(in_states(_DERIVED_STATES), history_derived=True, updated_at__gte=since)
    if scope is not None:
        executions = executions.filter(tenant_id__in=scope)
    rows = list(executions.order_by("-updated_at").only(*history.COLUMNS, "job_id", "tenant_id", "updated_at")[:limit])
    events: list[dict[str, Any]] = [
        {
            "id": None,
            "executionId": str(execution.pk),
            "jobId": str(execution.job_id),
            "tenantId": execution.tenant_id,
            "runId": str(execution.run_id) if execution.run_id else None,
            "from": event.from_state,
            "to": event.to_state,
            "attempt": event.attempt,
            "at": event.at.isoformat(),
            "worker": event.worker_id,
            "message": event.message[:200],
            "_at": event.at,
        }
        for execution in rows
        for event in history.derived(execution)
        if event.at >= since
    ]
    events.sort(key=lambda event: event["_at"])
    return events
