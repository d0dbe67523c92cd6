"""Writes on jobs. Each function is one transaction and states what it guarantees."""

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from dispatcher import wakeup
from executions.models import Execution, Origin
from executions.states import ExecutionState, record_events
from jobs import cron
from jobs.models import Job, JobType
from jobs.states import TERMINAL as JOB_TERMINAL
from jobs.states import InvalidJobTransition, JobState, job_transition
from tenants.models import Tenant
from tenants.services import submit_rate_check


class IdempotencyConflict(Exception):
    """The key was used before with another request body."""


class QuotaExceeded(Exception):
    def __init__(self, reason: str, *, retry_after: int = 60) -> None:
        super().__init__(reason)
        self.retry_after = retry_after  # seconds, for the 429's Retry-After


def request_fingerprint(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def first_fire(*, job: Job, now: datetime) -> datetime | None:
    """When a job's schedule first fires, or None for a one-off whose run_at is unset."""
    if job.type == JobType.CRON:
        return cron.next_fire(job.schedule, job.timezone, now)
    return job.run_at


def execution_create(*, job: Job, scheduled_for: datetime, now: datetime, origin: str = Origin.SCHEDULE) -> Execution:
    """A PENDING execution of `job` due at `scheduled_for`, with its first event."""
    execution = Execution.objects.create(
        job=job,
        tenant_id=job.tenant_id,
        pool=job.pool,
        priority=job.priority,
        origin=origin,
        scheduled_for=scheduled_for,
        available_at=scheduled_for,
    )
    record_events(
        [(execution.id, 1, "")],
        source="",
        target=ExecutionState.PENDING,
        now=now,
        message="triggered" if origin == Origin.TRIGGER else "scheduled",
    )
    wakeup.notify(scheduled_for)
    return execution


@dataclass
class CreateResult:
    job: Job
    created: bool


def job_create(
    *,
    tenant: Tenant,
    fields: dict[str, Any],
    now: datetime,
    idempotency_key: str | None = None,
    fingerprint: str = "",
) -> CreateResult:
    """Create a job and its first execution in one transaction.

    With an idempotency key, a repeat of the same request returns the job the first one made,
    even when the two race: the unique index on (tenant, key) lets exactly one insert win.
    The same key with another body raises IdempotencyConflict.
    """
    if idempotency_key:
        existing = _job_by_key(tenant=tenant, key=idempotency_key, fingerprint=fingerprint)
        if existing:
            return CreateResult(existing, created=False)
    if reason := submit_rate_check(tenant=tenant, now=now):
        # The rate's window is the minute: a retry after its end is counted afresh.
        raise QuotaExceeded(reason, retry_after=60 - int(now.timestamp()) % 60)
    try:
        with transaction.atomic():
            if tenant.max_active_jobs is not None:
                # Lock the tenant row so concurrent creates count one another.
                Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
                active = Job.objects.filter(tenant=tenant, state__in=[JobState.ACTIVE, JobState.PAUSED]).count()
                if active >= tenant.max_active_jobs:
                    raise QuotaExceeded(
                        f"tenant '{tenant.slug}' has reached its limit of {tenant.max_active_jobs} active jobs"
                    )
            job = Job(tenant=tenant, idempotency_key=idempotency_key or None, request_fingerprint=fingerprint, **fields)
            if job.type == JobType.DELAYED:
                job.run_at = now + timedelta(seconds=job.delay_sec)
            job.next_fire_at = first_fire(job=job, now=now)
            job.save()
            execution_create(job=job, scheduled_for=job.next_fire_at, now=now)
    except IntegrityError:
        if not idempotency_key:
            raise
        existing = _job_by_key(tenant=tenant, key=idempotency_key, fingerprint=fingerprint)
        if existing is None:
            raise
        return CreateResult(existing, created=False)
    return CreateResult(job, created=True)


def _job_by_key(*, tenant: Tenant, key: str, fingerprint: str) -> Job | None:
    job = Job.objects.filter(tenant=tenant, idempotency_key=key).first()
    if job is not None and job.request_fingerprint != fingerprint:
        raise IdempotencyConflict(f"Idempotency-Key '{key}' was already used with a different request body")
    return job


# Fields whose change moves the pending fire of the schedule.
_TIMING_FIELDS = {"run_at", "delay_sec", "schedule", "timezone"}


@transaction.atomic
def job_update(*, job: Job, fields: dict[str, Any], now: datetime) -> Job:
    """Change a job's definition. A change of timing re-times its pending scheduled fire; a
    change of pool or priority applies to executions not yet claimed."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.state in JOB_TERMINAL:
        # Nothing of a finished job will run again, so a new time would promise a phantom fire.
        raise InvalidJobTransition(job.id, job.state, "updated")
    for name, value in fields.items():
        setattr(job, name, value)
    pending = Execution.objects.filter(job=job, state=ExecutionState.PENDING)
    if _TIMING_FIELDS & fields.keys():
        if job.type == JobType.DELAYED and "delay_sec" in fields:
            job.run_at = now + timedelta(seconds=job.delay_sec)
        fire = first_fire(job=job, now=now)
        job.next_fire_at = fire
        moved = pending.filter(origin=Origin.SCHEDULE, attempt=1).update(
            scheduled_for=fire, available_at=fire, updated_at=now
        )
        if moved:
            wakeup.notify(fire)
    job.save()
    if {"pool", "priority"} & fields.keys():
        pending.update(pool=job.pool, priority=job.priority, updated_at=now)
    return job


def job_pause(*, job: Job, now: datetime) -> Job:
    """No execution of a paused job is claimed; the pending one waits for `resume`."""
    if not job_transition(job_id=job.pk, target=JobState.PAUSED, now=now):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.PAUSED)
    return Job.objects.get(pk=job.pk)


def job_resume(*, job: Job, now: datetime) -> Job:
    """A resumed cron job whose pending fire is long past runs it per its misfire policy."""
    if _state_of(job) != JobState.PAUSED or not job_transition(job_id=job.pk, target=JobState.ACTIVE, now=now):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.ACTIVE)
    wakeup.notify(now)
    return Job.objects.get(pk=job.pk)


@transaction.atomic
def job_cancel(*, job: Job, now: datetime) -> Job:
    """No future fires: the job is CANCELLED, and so is every execution of it not yet started
    (pending or queued). Runs already started finish (cancel them one by one to stop them)."""
    from executions.services import execution_cancel

    if not job_transition(job_id=job.pk, target=JobState.CANCELLED, now=now, next_fire_at=None):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.CANCELLED)
    for execution in Execution.objects.filter(job_id=job.pk, state__in=[ExecutionState.PENDING, ExecutionState.QUEUED]):
        execution_cancel(execution=execution, now=now, reason="job cancelled")
    return Job.objects.get(pk=job.pk)


@transaction.atomic
def job_trigger(*, job: Job, now: datetime) -> Execution:
    """Run now, outside the schedule: a new execution due immediately."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.state == JobState.COMPLETED:
        job_transition(job_id=job.pk, target=JobState.ACTIVE, now=now)
    elif job.state == JobState.PAUSED:
        raise InvalidJobTransition(job.pk, job.state, "triggered", "the job is paused; resume it first")
    elif job.state != JobState.ACTIVE:
        raise InvalidJobTransition(job.pk, job.state, "triggered", f"the job is {job.state.lower()}; it runs no more")
    return execution_create(job=job, scheduled_for=now, now=now, origin=Origin.TRIGGER)


# The execution states from which a run can still happen.
_OPEN_STATES = [s for s in ExecutionState.values if s not in ("SUCCEEDED", "CANCELLED", "DEAD")]


def jobs_settle(*, job_ids: list, now: datetime) -> None:
    """A one-off job is COMPLETED once none of its executions can run any more."""
    (
        Job.objects.filter(pk__in=job_ids, state=JobState.ACTIVE)
        .exclude(type=JobType.CRON)
        .exclude(executions__state__in=_OPEN_STATES)
        .update(state=JobState.COMPLETED, next_fire_at=None, updated_at=now)
    )


def jobs_settle_sql(*, moved: str, now: datetime) -> tuple[str, list]:
    """`jobs_settle` as a step of a data-modifying CTE (PostgreSQL) in which the executions in
    `moved` (columns id, job_id) have just reached a terminal state. Every step of such a
    statement reads the rows as they were before it, so this one leaves those executions out
    rather than seeing them still open. Lets a worker record outcomes in one statement."""
    return (
        "UPDATE jobs_job SET state = %s, next_fire_at = NULL, updated_at = %s"
        f" FROM {moved} WHERE jobs_job.id = {moved}.job_id AND jobs_job.state = %s AND jobs_job.type <> %s"
        " AND NOT EXISTS (SELECT 1 FROM executions_execution other WHERE other.job_id = jobs_job.id"
        f" AND other.id NOT IN (SELECT id FROM {moved}) AND other.state NOT IN ({_FINISHED_STATES_SQL}))",
        [JobState.COMPLETED.value, now, JobState.ACTIVE.value, JobType.CRON.value],
    )


# "Not finished" rather than "in an open state": a condition the state index cannot serve, so
# the probe walks the job's few executions instead of a bitmap of every pending one (3.5 ms per
# outcome at 40,000 pending, seen in EXPLAIN ANALYZE). Literals: the states are our own constants.
_FINISHED_STATES_SQL = ", ".join(f"'{s}'" for s in ExecutionState.values if s not in _OPEN_STATES)


def job_advance(*, job_id, next_fire_at: datetime | None, now: datetime) -> None:
    Job.objects.filter(pk=job_id).update(next_fire_at=next_fire_at, updated_at=now)


def _state_of(job: Job) -> str:
    return Job.objects.filter(pk=job.pk).values_list("state", flat=True).first() or job.state
