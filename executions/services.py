"""Writes on executions that people and services ask for (cancel, re-drive, discard from the dead
letter), and the retry policy's verdict after a failure. Each says what it guarantees; the moves
are named transitions."""

import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction

from executions import steps, transitions
from executions.models import Execution
from executions.retry import Backoff, RetryPolicy, next_attempt_at
from executions.states import REDRIVABLE, RETRYABLE, ExecutionState, InvalidTransition
from jobs import transitions as job_transitions
from jobs import workflow
from jobs.models import Job
from jobs.states import JobState

S = ExecutionState


def retry_policy_of(job: Job) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=job.max_attempts,
        backoff=Backoff(job.backoff),
        initial_delay_ms=job.initial_delay_ms,
        max_delay_ms=job.max_delay_ms,
        jitter=job.jitter,
    )


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
    job becomes active again. A workflow step's downstream steps that were cancelled (it failed,
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
    if job.state == JobState.COMPLETED and not job_transitions.job_reopen(job_id=job.pk, now=now):
        raise InvalidTransition(f"{current} (job {job.state.lower()})", S.PENDING)
    if execution.run_id is not None:
        # A step's downstream steps, cancelled because it failed, wait for it again.
        steps.reopen_downstream(run_id=execution.run_id, step=execution.step, now=now)
    return Execution.objects.get(pk=execution.pk)


def executions_discard(*, executions: Sequence[Execution], now: datetime, reason: str) -> set[Any]:
    """DEAD → DISCARDED for those of `executions` still DEAD (one statement, in the caller's
    transaction when there is one). Returns the ids moved."""
    moved = transitions.discard_dead_many([e.pk for e in executions], now=now, reason=reason)
    return {m.id for m in moved}


def execution_settle_failure(
    *, execution_id, failed_state: ExecutionState, now: datetime, rng: random.Random | None = None
) -> ExecutionState | None:
    """Apply the job's retry policy to an execution that just entered a failure state: back to
    PENDING as the next attempt after the backoff, or DEAD when attempts are exhausted. Returns
    the state it reached, or None if it was not (any more) in `failed_state`. Call inside the
    transaction that recorded the failure, so no failure is left unresolved."""
    assert failed_state in RETRYABLE
    row = Execution.objects.select_related("job", "run").filter(pk=execution_id, state=failed_state).first()
    if row is None:
        return None
    policy = retry_policy_of(row.job)
    if row.run is not None:  # a workflow step: its own policy, as its run keeps it
        given = workflow.step_of(row.run.steps, row.step)["retryPolicy"]
        policy = RetryPolicy(
            max_attempts=given["maxAttempts"],
            backoff=Backoff(given["backoff"]),
            initial_delay_ms=given["initialDelayMs"],
            max_delay_ms=given["maxDelayMs"],
            jitter=given["jitter"],
        )
    when = next_attempt_at(policy, row.attempt, now, rng)
    if when is None:
        message = _exhausted_message(row.attempt, policy.max_attempts)
        if transitions.discard(execution_id=execution_id, source=failed_state, now=now, message=message):
            return S.DEAD
        return None
    message = f"retry {row.attempt + 1} of {policy.max_attempts} at {when.isoformat()}"
    if transitions.retry(execution_id=execution_id, source=failed_state, now=now, available_at=when, message=message):
        return S.PENDING
    return None


def _exhausted_message(attempt: int, max_attempts: int) -> str:
    if attempt <= max_attempts:
        return f"attempts exhausted ({attempt} of {max_attempts})"
    # Only a re-drive runs an attempt past the policy's last; it gets that one attempt, no retries.
    return f"attempts exhausted (attempt {attempt}, re-driven after the policy's {max_attempts}; no retries left)"
