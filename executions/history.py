"""An execution's history as its readers see it: the events of its timeline, oldest first, whether
they are ExecutionEvent rows or told by its own columns (store/history.py says which, and why).

Every reader of the history goes through here (the API's `events`, the dashboard's timeline and
attempts, the test harness): a derived event is an unsaved ExecutionEvent (its `id` is None), so
a reader cannot tell the two apart but by that. An execution's history is all rows or all
derived (`history_derived`), never both, so nothing is merged or de-duplicated.
"""

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from executions.models import Execution, ExecutionEvent
from store import history

# What a reader must have loaded of an execution for `timeline` (no other query than its rows').
COLUMNS = ("id", "state", "history_derived", *history.DERIVED_FROM)

# No event of an execution is older than the execution (its first is made at `created_at`), but
# hosts' clocks differ: a bound this far before it loses no event, and on PostgreSQL, where the
# history is partitioned by day (store/postgres/partitions.py), it leaves out the older days'
# partitions: a timeline read probes a few, not every day's of the retention (35 at 30 days:
# 1.1-1.5 ms a read against one index, measured).
_CLOCKS_APART = timedelta(days=1)


def derived(execution: Execution) -> list[ExecutionEvent]:
    """The events `execution`'s columns tell; [] when its history is rows."""
    if not execution.history_derived:
        return []
    return history.event_models(ExecutionEvent, execution.pk, execution, state=execution.state)


def timeline(execution: Execution) -> list[ExecutionEvent]:
    """The execution's history, oldest first (by time, then as written)."""
    if execution.history_derived:
        return derived(execution)
    since = execution.created_at - _CLOCKS_APART
    return list(ExecutionEvent.objects.filter(execution_id=execution.pk, at__gte=since).order_by("at", "id"))


def timelines(executions: Iterable[Execution]) -> dict[Any, list[ExecutionEvent]]:
    """The histories of many executions (id: events, oldest first), in one query for the rows."""
    executions = list(executions)
    stored = [e for e in executions if not e.history_derived]
    events: dict[Any, list[ExecutionEvent]] = {e.pk: derived(e) for e in executions}
    if stored:
        since = min(e.created_at for e in stored) - _CLOCKS_APART
        rows = ExecutionEvent.objects.filter(execution_id__in=[e.pk for e in stored], at__gte=since)
        for event in rows.order_by("at", "id"):
            events[event.execution_id].append(event)
    return events


def last_message(execution: Execution) -> str:
    """The newest event's message of a derived history (what the move into its state said)."""
    events = derived(execution)
    return events[-1].message if events else ""
