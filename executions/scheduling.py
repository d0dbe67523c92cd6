"""Writes on a job and its executions together: create a job with its first run, change its timing
(which re-times its pending run), cancel it with its unstarted runs, trigger a run now, pause and
resume it. Each function is one transaction and states what it guarantees."""

import hashlib
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from executions import runs, tallies, transitions
from executions.models import Execution, Origin, Run
from executions.services import execution_cancel
from executions.states import ExecutionState
from executions.store import store
from jobs import cron, recurrence
from jobs import transitions as job_transitions
from jobs.models import Job, JobType
from jobs.rows import new_row
from jobs.states import TERMINAL as JOB_TERMINAL
from jobs.states import InvalidJobTransition, JobState
from jobs.versions import version_number, version_one, versions_record
from telemetry import tracing
from tenants.models import Tenant
from tenants.services import SubmitRate, submit_rate_check


class IdempotencyConflict(Exception):
    """The key was used before with another request body."""


class StaleVersion(Exception):
    """A change was asked of a job at a version (an If-Match) that it is no longer at."""

    def __init__(self, job_id: Any, current: int, expected: Collection[int]) -> None:
        asked = " or ".join(str(number) for number in sorted(expected))
        said = f"the change was asked of version {asked}" if asked else "the change named none of its versions"
        super().__init__(f"job {job_id} is at version {current}; {said}")
        self.current = current


class InvalidItems(Exception):
    """Items of a bulk create that validation could not judge alone: (index, field, message)
    for each, e.g. an H schedule that, resolved with the job's own id, never fires."""

    def __init__(self, errors: list[tuple[int, str, str]]) -> None:
        super().__init__(f"{len(errors)} invalid item(s)")
        self.errors = errors


class QuotaExceeded(Exception):
    def __init__(self, reason: str, *, retry_after: int = 60, rate: SubmitRate | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after  # seconds, for the 429's Retry-After
        self.rate = rate  # the tenant's submit rate, when it has one and it was counted


def request_fingerprint(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def first_fire(*, job: Job, now: datetime) -> datetime | None:
    """When a job's schedule first fires (a DELAYED job's run_at is set from its delay first);
    None for an EVENT job, which no time fires. The API has refused a job without one: a one-off
    with no time, a schedule that never fires. A schedule's hashed (H) values are resolved with
    the job's id, so they hold for its life. A recurring job fires first at its `start_at` when
    that is ahead (jobs/recurrence.py)."""
    if job.type == JobType.EVENT:
        return None
    fire: datetime | None = job.run_at
    if (schedule := recurrence.of_job(job)) is not None:
        fire = recurrence.first_fire(schedule, now=now, start=job.start_at)
    if fire is None:
        raise ValueError(f"job {job.pk} ({job.type}) has no first fire")
    return fire


def _complete_timing(job: Job, now: datetime) -> None:
    """What a job's timing takes from the moment it is made: a new DELAYED job's instant, and an
    INTERVAL job's first fire when no `start_at` was given (a job changed to INTERVAL likewise)."""
    if job.type == JobType.DELAYED and job._state.adding:
        job.run_at = _delayed_run_at(job, now)
    if job.type == JobType.INTERVAL and job.start_at is None:
        job.start_at = now


def _delayed_run_at(job: Job, now: datetime) -> datetime:
    if job.delay_sec is None:
        raise ValueError(f"DELAYED job {job.pk} has no delay")
    return now + timedelta(seconds=job.delay_sec)


def execution_create(*, job: Job, scheduled_for: datetime, now: datetime, origin: str = Origin.SCHEDULE) -> Execution:
    """A run of `job` due at `scheduled_for` (executions/runs.py): its execution, or for a
    workflow job its first step's. Each with its first event."""
    return runs.fire(job=job, scheduled_for=scheduled_for, now=now, origin=origin).executions[0]


@dataclass
class CreateResult:
    job: Job
    created: bool
    rate: SubmitRate | None = None  # the tenant's submit rate after this create, when it has one


def job_create(
    *,
    tenant: Tenant,
    fields: dict[str, Any],
    now: datetime,
    idempotency_key: str | None = None,
    fingerprint: str = "",
    actor: str = "",
) -> CreateResult:
    """Create a job and its first execution in one transaction.

    With an idempotency key, a repeat of the same request returns the job the first one made,
    even when the two race: the unique index on (tenant, key) lets exactly one insert win.
    The same key with another body raises IdempotencyConflict.
    `actor` is kept on the job as who created it: its version 1's author (jobs.versions).
    Traced as `tickwork.create_job`, whose context the execution stores (telemetry/tracing.py).
    """
    with tracing.span("tickwork.create_job", {"tenant.slug": tenant.slug, "job.type": fields.get("type")}) as span:
        made = _job_create(
            tenant=tenant, fields=fields, now=now, idempotency_key=idempotency_key, fingerprint=fingerprint, actor=actor
        )
        tracing.annotate(span, {"job.id": made.job.pk, "job.created": made.created})
    return made


def _job_create(
    *,
    tenant: Tenant,
    fields: dict[str, Any],
    now: datetime,
    idempotency_key: str | None,
    fingerprint: str,
    actor: str,
) -> CreateResult:
    if idempotency_key:
        existing = _job_by_key(tenant=tenant, key=idempotency_key, fingerprint=fingerprint)
        if existing:
            return CreateResult(existing, created=False)
    rate = submit_rate_check(tenant=tenant, now=now)
    if rate is not None and rate.refused:
        # The rate's window is the minute: a retry after its end is counted afresh.
        raise QuotaExceeded(rate.refused, retry_after=rate.reset, rate=rate)
    try:
        # A savepoint only where a failure is caught and the transaction goes on (the key's race).
        with transaction.atomic(savepoint=bool(idempotency_key)):
            if tenant.max_active_jobs is not None:
                # Lock the tenant row so concurrent creates count one another.
                Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
                active = Job.objects.filter(tenant=tenant, state__in=[JobState.ACTIVE, JobState.PAUSED]).count()
                if active >= tenant.max_active_jobs:
                    raise QuotaExceeded(
                        f"tenant '{tenant.slug}' has reached its limit of {tenant.max_active_jobs} active jobs",
                        rate=rate,
                    )
            job = new_row(
                Job,
                {
                    "tenant": tenant,
                    "idempotency_key": idempotency_key or None,
                    "request_fingerprint": fingerprint,
                    "created_by": actor[:200],
                    **fields,
                },
            )
            _complete_timing(job, now)
            job.next_fire_at = first_fire(job=job, now=now)
            _insert_new_jobs(jobs=[job], now=now)
    except IntegrityError:
        if not idempotency_key:
            raise
        existing = _job_by_key(tenant=tenant, key=idempotency_key, fingerprint=fingerprint)
        if existing is None:
            raise
        return CreateResult(existing, created=False)
    return CreateResult(job, created=True, rate=rate)


# A bulk request's size limit: the API refuses a longer list before anything is validated.
MAX_BULK_JOBS = 1000


def bulk_item_key(key: str, index: int) -> str:
    """The idempotency key stored on the job at `index` of a batch submitted under `key`.

    A batch needs no table of its own: its jobs carry `<key>#<index>` under the same unique
    index (tenant, idempotency_key) that decides the single create's race. The batch is one
    transaction, so either every one of its keys exists or none does, and a racing duplicate's
    insert of `<key>#0` waits on the winner's uncommitted row and then fails as a whole. The
    index is after the last `#`, so two batch keys never derive the same item key; a single
    create that names `<key>#<index>` itself is told it conflicts (409), never given a batch's job.
    """
    return f"{key}#{index}"


@dataclass
class BulkCreateResult:
    jobs: list[Job]  # in the order of the items
    created: bool  # False: a replay of an earlier batch under the same key
    rate: SubmitRate | None = None  # the tenant's submit rate after this batch, when it has one


def jobs_create_bulk(
    *,
    tenant: Tenant,
    items: Sequence[dict[str, Any]],
    now: datetime,
    idempotency_key: str | None = None,
    fingerprint: str = "",
    actor: str = "",
) -> BulkCreateResult:
    """Create many jobs, each with its first execution, all or nothing, in one transaction.

    `items` are validated model fields, as `job_create` takes them. Guarantees:
    - all of them or none: one transaction, whose jobs, executions and CREATED events are each
      written by one set-based statement, and one wake-up of the dispatchers for the earliest fire;
    - each job's first fire is what `job_create` would give it (`first_fire`);
    - the tenant's quotas count every job: `submit_rate` counts the batch's jobs (a refused batch
      is not counted), and a batch that would take the tenant past `max_active_jobs` is refused
      whole (QuotaExceeded), counted under the tenant row's lock as single creates count;
    - with an idempotency key, the same batch again (same fingerprint) returns the jobs the first
      one made, in order, even when the two race; the key with another body raises
      IdempotencyConflict (see `bulk_item_key` for how a batch's key is stored);
    - `actor` is kept on each job as who created it: its version 1's author (jobs.versions).
    Traced as one `tickwork.create_jobs`, whose context every execution of the batch stores.
    """
    if not items:
        raise ValueError("a bulk create needs at least one job")
    with tracing.span("tickwork.create_jobs", {"tenant.slug": tenant.slug, "jobs.count": len(items)}):
        return _jobs_create_bulk(
            tenant=tenant, items=items, now=now, idempotency_key=idempotency_key, fingerprint=fingerprint, actor=actor
        )


def _jobs_create_bulk(
    *,
    tenant: Tenant,
    items: Sequence[dict[str, Any]],
    now: datetime,
    idempotency_key: str | None,
    fingerprint: str,
    actor: str,
) -> BulkCreateResult:
    keys = [bulk_item_key(idempotency_key, index) for index in range(len(items))] if idempotency_key else []
    if keys and (existing := _batch_by_keys(tenant=tenant, keys=keys, fingerprint=fingerprint)):
        return BulkCreateResult(existing, created=False)
    rate = submit_rate_check(tenant=tenant, now=now, count=len(items))
    if rate is not None and rate.refused:
        raise QuotaExceeded(rate.refused, retry_after=rate.reset, rate=rate)
    try:
        with transaction.atomic():
            if tenant.max_active_jobs is not None:
                Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
                # A racing twin of this batch may have committed while we waited for the lock:
                # its jobs count as active, so look for them before counting, or a replay is a 429.
                if keys and (existing := _batch_by_keys(tenant=tenant, keys=keys, fingerprint=fingerprint)):
                    return BulkCreateResult(existing, created=False)
                active = Job.objects.filter(tenant=tenant, state__in=[JobState.ACTIVE, JobState.PAUSED]).count()
                if active + len(items) > tenant.max_active_jobs:
                    raise QuotaExceeded(
                        f"tenant '{tenant.slug}' has {active} active jobs and a limit of {tenant.max_active_jobs};"
                        f" a batch of {len(items)} would go over it",
                        rate=rate,
                    )
            jobs, invalid = [], []
            for index, fields in enumerate(items):
                job = new_row(
                    Job,
                    {
                        "tenant": tenant,
                        "idempotency_key": keys[index] if keys else None,
                        "request_fingerprint": fingerprint,
                        "created_by": actor[:200],
                        **fields,
                    },
                )
                _complete_timing(job, now)
                try:
                    job.next_fire_at = first_fire(job=job, now=now)
                except cron.CronError as exc:
                    invalid.append((index, "schedule", str(exc)))
                    continue
                jobs.append(job)
            if invalid:
                raise InvalidItems(invalid)
            _insert_new_jobs(jobs=jobs, now=now)
    except IntegrityError:
        if not keys:
            raise
        existing = _batch_by_keys(tenant=tenant, keys=keys, fingerprint=fingerprint)
        if not existing:
            raise
        return BulkCreateResult(existing, created=False)
    return BulkCreateResult(jobs, created=True, rate=rate)


def _insert_new_jobs(*, jobs: Sequence[Job], now: datetime) -> None:
    """Write new jobs (their next_fire_at set) with their first runs, in the caller's transaction
    and a constant number of statements however many (the jobs; the plain ones' executions and
    their events and one wake-up), sent as one statement. No version: a new job's version 1 is its
    row (jobs.versions)."""
    with store().together():
        store().insert_new(jobs)
        plain = [(job, job.next_fire_at) for job in jobs if job.next_fire_at and not job.workflow]
        transitions.create_many(runs=plain, now=now)
    for job in jobs:
        if job.next_fire_at and job.workflow:  # a run of steps each: rarer than plain jobs, made one by one
            runs.fire(job=job, scheduled_for=job.next_fire_at, now=now)


def _batch_by_keys(*, tenant: Tenant, keys: list[str], fingerprint: str) -> list[Job]:
    """The jobs of the batch whose item keys are `keys`, in order; [] when none exists."""
    found = {job.idempotency_key: job for job in Job.objects.filter(tenant=tenant, idempotency_key__in=keys)}
    for job in found.values():
        job.tenant = tenant  # the answer names it: not one query per job
    if not found:
        return []
    if any(job.request_fingerprint != fingerprint for job in found.values()) or len(found) != len(keys):
        # Another body under the key (or a single create that took one of its item keys).
        raise IdempotencyConflict(
            f"Idempotency-Key '{keys[0].rpartition('#')[0]}' was already used with a different request body"
        )
    return [found[key] for key in keys]


def _job_by_key(*, tenant: Tenant, key: str, fingerprint: str) -> Job | None:
    job = Job.objects.filter(tenant=tenant, idempotency_key=key).first()
    if job is not None and job.request_fingerprint != fingerprint:
        raise IdempotencyConflict(f"Idempotency-Key '{key}' was already used with a different request body")
    return job


# Fields whose change moves the pending fire of the schedule.
_TIMING_FIELDS = {"type", "run_at", "delay_sec", "schedule", "timezone", "every_sec", "start_at"}


def _check_version(job: Job, versions: Collection[int] | None) -> None:
    """Refuse (StaleVersion) unless the job is at one of `versions` (None: at any). The caller
    holds the job's row lock, which every change of its definition takes (job_update): of two
    writers asking for the same version, the second reads the first one's version once it has
    committed, and is refused."""
    if versions is None:
        return
    current = version_number(job=job)
    if current not in versions:
        raise StaleVersion(job.pk, current, versions)


def _lock_at_version(job: Job, versions: Collection[int] | None) -> None:
    """For a state change asked of a version: the job's row lock, and the version checked under it."""
    if versions is not None:
        Job.objects.select_for_update().filter(pk=job.pk).values_list("pk", flat=True).first()
        _check_version(job, versions)


@transaction.atomic
def job_update(
    *, job: Job, fields: dict[str, Any], now: datetime, actor: str = "", if_version: Collection[int] | None = None
) -> Job:
    """Change a job's definition. A change of timing re-times its pending scheduled fire; a
    change of pool or priority applies to executions not yet claimed. A change of the definition
    records its next version (jobs.versions), made by `actor`, in the same transaction; an
    update that changes nothing records none. With `if_version`, only a job at one of those
    versions is changed (StaleVersion otherwise), checked under the job's row lock."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    _check_version(job, if_version)
    if job.state in JOB_TERMINAL:
        # Nothing of a finished job will run again, so a new time would promise a phantom fire.
        raise InvalidJobTransition(job.id, job.state, "updated")
    before = {job.pk: version_one(job)}  # its version 1, should the row still be the only one that holds it
    for name, value in fields.items():
        setattr(job, name, value)
    pending = Execution.objects.filter(job=job, state=ExecutionState.PENDING)
    waiting = _waiting_run(job)
    if _TIMING_FIELDS & fields.keys():
        if job.type == JobType.DELAYED and "delay_sec" in fields:
            job.run_at = _delayed_run_at(job, now)
        _complete_timing(job, now)
        fire = first_fire(job=job, now=now)
        job.next_fire_at = fire
        moved = pending.filter(origin=Origin.SCHEDULE, attempt=1, run__isnull=True).update(
            scheduled_for=fire, available_at=fire, updated_at=now
        )
        if waiting is not None and fire is not None:
            waiting.executions.update(scheduled_for=fire, available_at=fire, updated_at=now)
            Run.objects.filter(pk=waiting.pk).update(scheduled_for=fire)
        if moved or waiting is not None:
            store().notify_due(fire or now)
    if "workflow" in fields and waiting is not None:
        # The scheduled run that has not begun takes the new steps: it is made again, at its time.
        scheduled_for = Run.objects.get(pk=waiting.pk).scheduled_for
        # Its executions go with it: first attempts that have not run count nothing (tallies.py).
        waiting.delete()
        runs.fire(job=job, scheduled_for=scheduled_for, now=now)
    job.save()
    # Under the row lock taken above: concurrent updates of the job number their versions in turn.
    versions_record(jobs=[job], actor=actor, now=now, before=before)
    if {"pool", "priority"} & fields.keys():
        # A retry waiting here takes its earlier attempts to the new pool: the metrics' retries
        # of each pool stay where they were (executions/tallies.py).
        with tallies.folding(pending):
            pending.update(pool=job.pool, priority=job.priority, updated_at=now)
    return job


def _waiting_run(job: Job) -> Run | None:
    """The workflow job's scheduled run that has not begun: not admitted by a dispatcher, and
    none of its steps past PENDING or BLOCKED at its first attempt. None for a plain job."""
    if not job.workflow:
        return None
    for run in Run.objects.filter(job=job, origin=Origin.SCHEDULE, admitted=False):
        started = run.executions.exclude(state__in=[ExecutionState.PENDING, ExecutionState.BLOCKED], attempt=1)
        if not started.exists():
            return run
    return None


@transaction.atomic
def job_pause(*, job: Job, now: datetime, if_version: Collection[int] | None = None) -> Job:
    """No execution of a paused job is claimed; the pending one waits for `resume`. With
    `if_version`, as job_update's."""
    _lock_at_version(job, if_version)
    if not job_transitions.job_pause(job_id=job.pk, now=now):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.PAUSED)
    return Job.objects.get(pk=job.pk)


@transaction.atomic
def job_resume(*, job: Job, now: datetime, if_version: Collection[int] | None = None) -> Job:
    """A resumed cron job whose pending fire is long past runs it per its misfire policy. With
    `if_version`, as job_update's."""
    _lock_at_version(job, if_version)
    if not job_transitions.job_resume(job_id=job.pk, now=now):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.ACTIVE)
    store().notify_due(now)
    return Job.objects.get(pk=job.pk)


@transaction.atomic
def job_cancel(*, job: Job, now: datetime, if_version: Collection[int] | None = None) -> Job:
    """No future fires: the job is CANCELLED, and so is every execution of it not yet started
    (pending or queued). Runs already started finish (cancel them one by one to stop them). With
    `if_version`, as job_update's."""
    _lock_at_version(job, if_version)
    if not job_transitions.job_cancel(job_id=job.pk, now=now):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.CANCELLED)
    unstarted_states = [ExecutionState.PENDING, ExecutionState.QUEUED]
    unstarted = Execution.objects.filter(job_id=job.pk, state__in=unstarted_states)
    waiting = Execution.objects.filter(job_id=job.pk, state__in=[ExecutionState.BLOCKED, *unstarted_states])
    for run_id in set(waiting.filter(run__isnull=False).values_list("run_id", flat=True)):
        # A run's steps together, BLOCKED ones too; not one by one, which would cancel the steps
        # below the first as its downstream steps.
        runs.cancel_run(run_id=run_id, now=now, reason="job cancelled", running=False)
    for execution in unstarted.filter(run__isnull=True):
        execution_cancel(execution=execution, now=now, reason="job cancelled")
    return Job.objects.get(pk=job.pk)


@transaction.atomic
def job_trigger(*, job: Job, now: datetime) -> Execution:
    """Run now, outside the schedule: a new execution due immediately."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.state == JobState.COMPLETED:
        if not job_transitions.job_reopen(job_id=job.pk, now=now):
            raise InvalidJobTransition(job.pk, _state_of(job), JobState.ACTIVE)
    elif job.state == JobState.PAUSED:
        raise InvalidJobTransition(job.pk, job.state, "triggered", "the job is paused; resume it first")
    elif job.state != JobState.ACTIVE:
        raise InvalidJobTransition(job.pk, job.state, "triggered", f"the job is {job.state.lower()}; it runs no more")
    return execution_create(job=job, scheduled_for=now, now=now, origin=Origin.TRIGGER)


def _state_of(job: Job) -> str:
    return Job.objects.filter(pk=job.pk).values_list("state", flat=True).first() or job.state


def jobs_prune(*, before: datetime, limit: int) -> int:
    """Delete up to `limit` jobs that ended (COMPLETED or CANCELLED) before `before` and have no
    execution left, oldest first, with their versions. The sweeper prunes finished executions
    after the retention, then this: at a constant daily volume of one-off jobs the jobs table
    holds steady too, instead of growing by the day's volume for ever. Reads the partial index
    of ended jobs (job_ended), so the look costs what it finds, not the table's size. It takes
    no execution with it, so the metrics' counters have nothing to fold (executions/tallies.py)."""
    ids = list(
        Job.objects.filter(state__in=JOB_TERMINAL, updated_at__lt=before)
        .exclude(Exists(Execution.objects.filter(job_id=OuterRef("pk"))))
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )
    if ids:
        Job.objects.filter(pk__in=ids).delete()
    return len(ids)
