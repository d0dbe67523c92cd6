"""Writes on executions: cancel, re-drive, and the retry policy's verdict after a failure."""

import random
from datetime import datetime

from django.db import transaction
from django.db.models import F

from dispatcher import wakeup
from executions.models import Execution
from executions.retry import Backoff, RetryPolicy, next_attempt_at
from executions.states import (
    REDRIVABLE,
    RETRYABLE,
    ExecutionState,
    InvalidTransition,
    record_events,
    transition,
)
from jobs.models import Job
from jobs.states import JobState, job_transition

S = ExecutionState


# What the next attempt starts without: the last attempt's run belongs to the events now. Its
# error stays, as "the last error", until the next attempt has an outcome.
_FRESH_ATTEMPT = {
    "lease_expires_at": None,
    "timeout_at": None,
    "republish_at": None,
    "cancel_requested_at": None,
    "started_at": None,
    "heartbeat_at": None,
    "finished_at": None,
    "worker_id": "",
}


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
    for source in (S.PENDING, S.QUEUED):
        if transition(
            execution_id=execution.pk,
            source=source,
            target=S.CANCELLED,
            now=now,
            message=reason,
            finished_at=now,
            cancel_requested_at=now,
            lease_expires_at=None,
            republish_at=None,
        ):
            return S.CANCELLED
    with transaction.atomic():
        requested = Execution.objects.filter(pk=execution.pk, state=S.RUNNING, cancel_requested_at__isnull=True).update(
            cancel_requested_at=now, updated_at=now
        )
        if requested:
            row = Execution.objects.values("attempt", "worker_id").get(pk=execution.pk)
            record_events(
                [(execution.pk, row["attempt"], row["worker_id"])],
                source=S.RUNNING,
                target=S.RUNNING,
                now=now,
                message=f"cancel requested: {reason}",
            )
            return S.RUNNING
    current = Execution.objects.filter(pk=execution.pk).values_list("state", flat=True).first()
    if current == S.RUNNING:
        return S.RUNNING  # already requested; asking twice is not an error
    raise InvalidTransition(current or "missing", S.CANCELLED)


@transaction.atomic
def execution_redrive(*, execution: Execution, now: datetime, reason: str = "re-driven") -> Execution:
    """Run a DEAD, FAILED or CANCELLED execution again, now, as its next attempt."""
    job = Job.objects.select_for_update().get(pk=execution.job_id)
    if job.state == JobState.CANCELLED:
        raise InvalidTransition(f"{execution.state} (job cancelled)", S.PENDING)
    current = Execution.objects.filter(pk=execution.pk).values_list("state", flat=True).first()
    if current not in REDRIVABLE or not transition(
        execution_id=execution.pk,
        source=S(current),
        target=S.PENDING,
        now=now,
        message=reason,
        attempt=F("attempt") + 1,
        available_at=now,
        error="",
        traceback="",
        **_FRESH_ATTEMPT,
    ):
        raise InvalidTransition(current or "missing", S.PENDING)
    if job.state == JobState.COMPLETED:
        job_transition(job_id=job.pk, target=JobState.ACTIVE, now=now)
    wakeup.notify(now)
    return Execution.objects.get(pk=execution.pk)


def execution_release(*, execution_id, lease_token: int, now: datetime, reason: str) -> bool:
    """RUNNING → PENDING for the worker holding `lease_token`, which is shutting down and stopped
    the handler short: the same attempt (no attempt is spent), due now, and the dispatchers woken.
    Returns whether it moved. A late outcome of this delivery cannot land (every outcome is
    conditional on RUNNING and its lease token), and the next claim takes a new lease token."""
    moved = transition(
        execution_id=execution_id,
        source=S.RUNNING,
        target=S.PENDING,
        now=now,
        lease_token=lease_token,
        message=reason,
        available_at=now,
        lease_expires_at=None,
        timeout_at=None,
        started_at=None,
        heartbeat_at=None,
    )
    if moved:
        wakeup.notify(now)
    return moved


def execution_settle_failure(
    *, execution_id, failed_state: ExecutionState, now: datetime, rng: random.Random | None = None
) -> ExecutionState | None:
    """Apply the job's retry policy to an execution that just entered a failure state: back to
    PENDING as the next attempt after the backoff, or DEAD when attempts are exhausted.
    Call inside the transaction that recorded the failure, so no failure is left unresolved."""
    assert failed_state in RETRYABLE
    row = Execution.objects.select_related("job").filter(pk=execution_id, state=failed_state).first()
    if row is None:
        return None
    when = next_attempt_at(retry_policy_of(row.job), row.attempt, now, rng)
    if when is None:
        transition(
            execution_id=execution_id,
            source=failed_state,
            target=S.DEAD,
            now=now,
            message=_exhausted_message(row.attempt, row.job.max_attempts),
            finished_at=now,
        )
        return S.DEAD
    transition(
        execution_id=execution_id,
        source=failed_state,
        target=S.PENDING,
        now=now,
        message=f"retry {row.attempt + 1} of {row.job.max_attempts} at {when.isoformat()}",
        attempt=F("attempt") + 1,
        available_at=when,
        **_FRESH_ATTEMPT,
    )
    wakeup.notify(when)
    return S.PENDING


def _exhausted_message(attempt: int, max_attempts: int) -> str:
    if attempt <= max_attempts:
        return f"attempts exhausted ({attempt} of {max_attempts})"
    # Only a re-drive runs an attempt past the policy's last; it gets that one attempt, no retries.
    return f"attempts exhausted (attempt {attempt}, re-driven after the policy's {max_attempts}; no retries left)"
