"""The due backlog: work that is due and not admitted because its pool's slots are taken, the
signal to add workers (README, "Scaling workers"; docs/admission.md). Told apart from the due
work that no worker would run, however many there were: that of a paused job (the claim admits
only active jobs' work) or of a paused pool (the claim skips it), `pendingReason` JOB_PAUSED and
POOL_PAUSED. Counting both as backlog had a paused every-minute job ask for more workers for
ever. Work not due yet (NOT_DUE) is neither.

Every reader of the backlog takes it from here: `GET /v1/pools`, `/metrics`, the pools' minute
samples behind the overview's charts, the overview's queue depths. One statement: a walk of the
due index (execution_due) joined to each due execution's job, so it costs what is due, never
the history.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import BooleanField, Case, Count, Min, QuerySet, Value, When

from executions.models import Execution
from executions.states import ExecutionState
from jobs.states import JobState
from scheduling.pool_pauses import paused_pools


@dataclass(frozen=True)
class Due:
    backlog: int = 0  # due, and waiting for a slot of its pool
    oldest: datetime | None = None  # the backlog's earliest available_at
    paused: int = 0  # due, and held by a paused job or a paused pool


NONE = Due()


def due_work(executions: QuerySet[Execution], *, now: datetime, by: Sequence[str] = ("pool",)) -> dict[Any, Due]:
    """The due PENDING ones of `executions`, by the fields `by` (the first is "pool"; one field:
    keyed by its value, more: by a tuple of them), told apart as the module says."""
    held_pools = set(paused_pools())
    rows = (
        executions.filter(state=ExecutionState.PENDING, available_at__lte=now)
        .annotate(
            active=Case(
                When(job__state=JobState.ACTIVE, then=Value(True)), default=Value(False), output_field=BooleanField()
            )
        )
        .values_list(*by, "active")
        .annotate(n=Count("pk"), oldest=Min("available_at"))
        .order_by()
    )
    found: dict[Any, Due] = {}
    for *key, active, n, oldest in rows:
        at = key[0] if len(key) == 1 else tuple(key)
        was = found.get(at, NONE)
        if active and key[0] not in held_pools:
            earliest = oldest if was.oldest is None else min(was.oldest, oldest)
            found[at] = Due(backlog=was.backlog + n, oldest=earliest, paused=was.paused)
        else:
            found[at] = Due(backlog=was.backlog, oldest=was.oldest, paused=was.paused + n)
    return found
