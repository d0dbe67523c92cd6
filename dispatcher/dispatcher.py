"""One unit of dispatcher work: claim what is due, materialise the next cron fires, publish."""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from background.publisher import Dispatch, Publisher
from dispatcher.claim import claim_due
from executions.models import Execution, Origin
from executions.services import execution_cancel
from executions.states import ACTIVE, ExecutionState, Moved, record_events, transition
from jobs import cron
from jobs.models import ConcurrencyPolicy, Job, MisfirePolicy

logger = logging.getLogger(__name__)
S = ExecutionState


@dataclass
class DispatchResult:
    claimed: int = 0
    published: int = 0
    skipped: int = 0  # fires not run because of a misfire or concurrency policy
    materialised: int = 0


def dispatch_once(*, now: datetime, publisher: Publisher, limit: int | None = None) -> DispatchResult:
    """Claim up to `limit` due executions and hand them to their pools after commit.

    In the same transaction, every claimed cron fire materialises the job's next fire (so a
    crash can lose neither), after applying the job's misfire and concurrency policies.
    """
    limit = limit or settings.TICKWORK_DISPATCH_BATCH
    result = DispatchResult()
    with transaction.atomic():
        claimed, cron_job_ids = claim_due(
            now=now, limit=limit, publish_grace=timedelta(seconds=settings.TICKWORK_PUBLISH_GRACE_SECONDS)
        )
        result.claimed = len(claimed)
        scheduled = [m for m in claimed if m.origin == Origin.SCHEDULE]
        jobs = {job.pk: job for job in Job.objects.filter(pk__in=cron_job_ids)} if cron_job_ids else {}
        skipped = _apply_policies([m for m in scheduled if m.job_id in jobs], jobs, now) if jobs else set()
        result.skipped = len(skipped)
        result.materialised = _materialise_next([m for m in scheduled if m.job_id in jobs], jobs, now)
        dispatches = [
            Dispatch(execution_id=str(m.id), lease_token=m.lease_token, pool=m.pool, priority=m.priority)
            for m in claimed
            if m.id not in skipped
        ]
        result.published = len(dispatches)
        if dispatches:
            transaction.on_commit(lambda: publisher.publish(dispatches))
    return result


def _is_missed(fire: datetime, now: datetime) -> bool:
    return fire < now - timedelta(seconds=settings.TICKWORK_MISFIRE_GRACE_SECONDS)


def _apply_policies(claimed: Sequence[Moved], jobs: dict, now: datetime) -> set:
    """Cancel the claimed fires that a policy says must not run; return their ids."""
    skipped: set = set()
    for m in claimed:
        if jobs[m.job_id].misfire_policy == MisfirePolicy.SKIP and m.attempt == 1 and _is_missed(m.scheduled_for, now):
            _skip(m, now, f"missed fire of {m.scheduled_for.isoformat()} skipped (misfirePolicy SKIP)")
            skipped.add(m.id)
    overlap = {job_id for job_id, job in jobs.items() if job.concurrency_policy != ConcurrencyPolicy.ALLOW}
    if not overlap:
        return skipped
    claimed_ids = [m.id for m in claimed]
    active = list(Execution.objects.filter(job_id__in=overlap, state__in=ACTIVE).exclude(pk__in=claimed_ids))
    busy = {e.job_id for e in active}
    for m in claimed:
        if m.id in skipped or m.job_id not in busy:
            continue
        if jobs[m.job_id].concurrency_policy == ConcurrencyPolicy.FORBID:
            _skip(m, now, "skipped: the previous run is still active (concurrencyPolicy FORBID)")
            skipped.add(m.id)
    # Replace only for a fire that will run: a missed fire skipped above replaces nothing.
    replacing = {m.job_id for m in claimed if m.id not in skipped}
    for execution in active:
        if execution.job_id in replacing and jobs[execution.job_id].concurrency_policy == ConcurrencyPolicy.REPLACE:
            execution_cancel(
                execution=execution, now=now, reason="replaced by a newer fire (concurrencyPolicy REPLACE)"
            )
    return skipped


def _skip(m: Moved, now: datetime, reason: str) -> None:
    transition(
        execution_id=m.id,
        source=S.QUEUED,
        target=S.CANCELLED,
        now=now,
        lease_token=m.lease_token,
        message=reason,
        finished_at=now,
        republish_at=None,
    )


def _materialise_next(claimed: Sequence[Moved], jobs: dict, now: datetime) -> int:
    """Create the fire after each claimed one. RUN_ALL walks every missed fire one claim at a
    time (a backfill); RUN_ONCE and SKIP jump to the first fire still ahead."""
    created = 0
    for m in claimed:
        job: Job = jobs[m.job_id]
        if m.attempt > 1:
            continue  # a retry of an old fire; its successor was made when it was first claimed
        fire = cron.next_fire(job.schedule, job.timezone, m.scheduled_for)
        if fire <= now and job.misfire_policy != MisfirePolicy.RUN_ALL:
            fire = cron.next_fire(job.schedule, job.timezone, now)
        try:
            with transaction.atomic():  # a savepoint: a fire that exists already is not an error
                execution = Execution.objects.create(
                    job=job,
                    tenant_id=job.tenant_id,
                    pool=job.pool,
                    priority=job.priority,
                    origin=Origin.SCHEDULE,
                    scheduled_for=fire,
                    available_at=fire,
                )
                record_events([(execution.id, 1, "")], source="", target=S.PENDING, now=now, message="scheduled")
            created += 1
        except IntegrityError:
            logger.info("fire %s of job %s exists already", fire.isoformat(), job.pk)
        Job.objects.filter(pk=job.pk).update(next_fire_at=fire, updated_at=now)
    return created
