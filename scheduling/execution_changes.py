"""Changes people and services ask of executions: cancel (now, or a request to the worker running
it), re-drive, discard from the dead letter. Each says what it guarantees; the moves are named
transitions."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction

from executions import steps, transitions
from executions.models import Execution
from executions.states import REDRIVABLE, ExecutionState, InvalidTransition
from jobs.models import Job
from jobs.states import JobState

S = ExecutionState


def execution_cancel(*, execution: Execution, now: datetime, reason: str = "cancelled") -> str:
    """Cancel now if it has not started; if it is running, record a durable request that the
    worker reads with its next heartbeat (and the sweeper enforces after a grace).

    Returns the state the execution is in, or will reach, as a result: CANCELLED, or RUNNING
    with the request recorded. Raises InvalidTransition for a finished execution.
    """
    if transitions.cancel(execution_id=execution.pk, now=now, reason=reason):
        return S.CANCELLED
    if transitions.request_cancel(execution_id=execution.pk, now=now, reason=reason):
        return S.RUNNING
    current = Execution.objects.filter(pk=execution.pk).values_list("state", flat=True).first()
    if current == S.RUNNING:
        return S.RUNNING  # already requested; asking twice is not an error
    raise InvalidTransition(current or "missing", S.CANCELLED)


@transaction.atomic
def execution_redrive(*, execution: Execution, now: datetime, reason: str = "re-driven") -> Execution:
    """Run a DEAD, FAILED or CANCELLED execution again, now, as its next attempt; its completed
    job reads ACTIVE again (executions/standing.py). A workflow step's downstream steps that were cancelled (it failed,
    or its run was cancelled) are BLOCKED again, to run after it."""
    job = Job.objects.select_for_update().get(pk=execution.job_id)
    if job.state == JobState.CANCELLED:
        raise InvalidTransition(f"{execution.state} (job cancelled)", S.PENDING)
    current = Execution.objects.filter(pk=execution.pk).values_list("state", flat=True).first()
    if execution.run_id is not None and (unmet := steps.unmet_upstream(run_id=execution.run_id, step=execution.step)):
        # It would run without what it depends on: the upstream step is the one to re-drive.
        waits = ", ".join(f"'{name}' ({state})" for name, state in unmet.items())
        raise InvalidTransition(
            current or "missing", S.PENDING, f"step '{execution.step}' waits for {waits}; re-drive that"
        )
    if current not in REDRIVABLE or not transitions.redrive(
        execution_id=execution.pk, source=S(current), now=now, reason=reason
    ):
        raise InvalidTransition(current or "missing", S.PENDING)
    if execution.run_id is not None:
        # A step's downstream steps, cancelled because it failed, wait for it again.
        steps.reopen_downstream(run_id=execution.run_id, step=execution.step, now=now)
    return Execution.objects.get(pk=execution.pk)


def executions_discard(*, executions: Sequence[Execution], now: datetime, reason: str) -> set[Any]:
    """DEAD → DISCARDED for those of `executions` still DEAD (one statement, in the caller's
    transaction when there is one). Returns the ids moved."""
    moved = transitions.discard_dead_many([e.pk for e in executions], now=now, reason=reason)
    return {m.id for m in moved}
