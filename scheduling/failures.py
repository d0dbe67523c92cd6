"""What follows a failure: the retry policy's verdict on an execution that just entered a failure
state (FAILED, TIMED_OUT, FAILED_WORKER_LOST), in the transaction that recorded it. The policy is
the job's, or a workflow step's as its run keeps it; the arithmetic is executions/retry.py's."""

import random
from datetime import datetime

from executions import transitions
from executions.models import Execution
from executions.retry import Backoff, RetryPolicy, next_attempt_at
from executions.states import RETRYABLE, ExecutionState
from jobs import workflow
from jobs.models import Job

S = ExecutionState


def retry_policy_of(job: Job) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=job.max_attempts,
        backoff=Backoff(job.backoff),
        initial_delay_ms=job.initial_delay_ms,
        max_delay_ms=job.max_delay_ms,
        jitter=job.jitter,
    )


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
        given = workflow.step_of(row.run.steps, row.step)["retry_policy"]
        policy = RetryPolicy(
            max_attempts=given["max_attempts"],
            backoff=Backoff(given["backoff"]),
            initial_delay_ms=given["initial_delay_ms"],
            max_delay_ms=given["max_delay_ms"],
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
