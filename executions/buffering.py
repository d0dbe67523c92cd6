"""The named transitions of a concurrencyPolicy BUFFER_ONE job's waiting fire (jobs/overlap.py):
into BLOCKED while the job's run in progress lasts, and out of it, due now, once that run ended.
The dispatcher makes both (dispatcher/dispatcher.py, scheduling/runs.py); a workflow run's waiting
steps leave BLOCKED by `steps.release_steps`, as any step's do."""

from datetime import datetime
from typing import Any

from executions.moves import accepts, moves
from executions.states import ExecutionState
from executions.transitions import _move
from store import store

S = ExecutionState


@moves([S.PENDING, S.QUEUED], S.BLOCKED)
def buffer(*, execution_id: Any, source: ExecutionState, now: datetime, reason: str) -> bool:
    """PENDING or QUEUED → BLOCKED for a fire (or a step of a run) of a BUFFER_ONE job that must
    wait for the job's run in progress to end. The dispatcher does it in its claim's transaction:
    a QUEUED one was claimed there and never published, so nothing is to be published again."""
    accepts("buffer", source)
    return _move(execution_id=execution_id, source=source, target=S.BLOCKED, now=now, message=reason, republish_at=None)


@moves([S.BLOCKED], S.PENDING)
def unbuffer(*, execution_id: Any, now: datetime, reason: str) -> bool:
    """BLOCKED → PENDING, due now, for a buffered fire whose job has no run in progress any more;
    the dispatchers are woken."""
    moved = _move(
        execution_id=execution_id, source=S.BLOCKED, target=S.PENDING, now=now, message=reason, available_at=now
    )
    if moved:
        store().notify_due(now)
    return moved
