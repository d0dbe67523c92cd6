"""Creating jobs, one or a batch, each with its first run, in one transaction: the tenant's quotas
(submit rate, active jobs) counted, and a repeated request under an idempotency key answered with
what the first one made."""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from executions import transitions
from executions.standing import live_count
from jobs import cron
from jobs.models import Job
from jobs.rows import new_row
from scheduling import runs
from scheduling.timing import complete_timing, first_fire
from store import store
from telemetry import tracing
from tenants.models import Tenant
from tenants.services import SubmitRate, submit_rate_check


class IdempotencyConflict(Exception):
    """The key was used before with another request body."""


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
                active = live_count(Job.objects.filter(tenant=tenant))
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
            complete_timing(job, now)
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
                active = live_count(Job.objects.filter(tenant=tenant))
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
                complete_timing(job, now)
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
