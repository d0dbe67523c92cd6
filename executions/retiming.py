"""Re-timing what has not started: when a job's definition changes, its pending scheduled run
moves to the new time, and its pending executions to the new pool and priority
(scheduling/job_changes.job_update). They move no state, but they write what the claim reads;
like every move of an execution they are named, here, and nothing else writes an execution's
`available_at` (executions/states.py, the machine's `guarded` columns)."""

from datetime import datetime
from typing import Any

from executions import tallies
from executions.models import Execution, Origin, Run
from executions.states import ExecutionState


def retime_scheduled(*, job_id: Any, fire: datetime | None, now: datetime) -> int:
    """The job's pending scheduled fire outside a run (a first attempt) is due at `fire`.
    Returns how many executions moved (0 or 1)."""
    return Execution.objects.filter(
        job_id=job_id, state=ExecutionState.PENDING, origin=Origin.SCHEDULE, attempt=1, run__isnull=True
    ).update(scheduled_for=fire, available_at=fire, updated_at=now)


def retime_run(*, run_id: Any, fire: datetime, now: datetime) -> None:
    """A workflow run that has not begun (none of its steps past PENDING or BLOCKED at its first
    attempt) is due at `fire`, with all its steps."""
    Execution.objects.filter(run_id=run_id).update(scheduled_for=fire, available_at=fire, updated_at=now)
    Run.objects.filter(pk=run_id).update(scheduled_for=fire)


def refold(*, execution_id: Any, fire: datetime, event_id: Any, now: datetime) -> bool:
    """A debounced event run that has not started (events/debounce.py) is due at `fire` and
    carries `event_id`, the last event folded into it. False when it was claimed meanwhile."""
    return bool(
        Execution.objects.filter(pk=execution_id, state=ExecutionState.PENDING, started_at__isnull=True).update(
            scheduled_for=fire, available_at=fire, event_id=event_id, updated_at=now
        )
    )


def repool_pending(*, job_id: Any, pool: str, priority: int, now: datetime) -> None:
    """The job's pending executions go to `pool` at `priority`, not yet claimed. A retry waiting
    here takes its earlier attempts to the new pool: the metrics' retries of each pool stay where
    they were (executions/tallies.py)."""
    pending = Execution.objects.filter(job_id=job_id, state=ExecutionState.PENDING)
    with tallies.folding(pending):
        pending.update(pool=pool, priority=priority, updated_at=now)
