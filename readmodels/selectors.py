import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet

from executions import history
from executions.models import Execution, ExecutionEvent, Origin, in_states
from executions.states import ExecutionState
from jobs import misfire, recurrence
from jobs import registry as job_registry
from jobs.models import Job
from jobs.states import InvalidJobTransition, JobState
from pools import registry
from readmodels.backlog import NONE as NO_DUE
from readmodels.backlog import due_work


def execution_list(*, scope: list[int] | None) -> QuerySet[Execution]:
    executions = Execution.objects.all()
    return executions if scope is None else executions.filter(tenant_id__in=scope)


def execution_get(*, scope: list[int] | None, execution_id) -> Execution | None:
    try:
        return execution_list(scope=scope).select_related("job").filter(pk=execution_id).first()
    except ValidationError:  # a malformed id is simply not found
        return None


def execution_events(*, execution: Execution) -> list[ExecutionEvent]:
    """Its history, oldest first: rows, or told by its columns (executions/history.py)."""
    return history.timeline(execution)


def latest_executions(*, job_id, limit: int = 10) -> list[Execution]:
    return list(Execution.objects.filter(job_id=job_id).order_by("-scheduled_for", "-created_at")[:limit])


@dataclass(frozen=True)
class ResumePreview:
    job: Job
    policy: str
    at: datetime
    misfire_grace: timedelta
    catch_up: misfire.CatchUp


def job_resume_preview(*, job: Job, now: datetime, limit: int = 100) -> ResumePreview:
    """What `job_resume` at `now` would lead the dispatcher to run and skip, changing nothing:
    the job's due executions, its pending cron fire under the misfire policy (jobs/misfire.py, the
    rules the dispatcher applies) and the fires missed since. A job that is not paused raises
    InvalidJobTransition, as resume does.

    It cannot foresee what is decided when the fires are claimed: a concurrencyPolicy FORBID or
    REPLACE against runs active then, or a SKIP fire whose grace (or a fire whose catch-up window)
    runs out before it is claimed."""
    current = Job.objects.filter(pk=job.pk).values_list("state", flat=True).first() or job.state
    if current != JobState.PAUSED:
        raise InvalidJobTransition(job.pk, current, JobState.ACTIVE)
    grace = timedelta(seconds=settings.TICKWORK_MISFIRE_GRACE_SECONDS)
    pending = list(Execution.objects.filter(job_id=job.pk, state=ExecutionState.PENDING).order_by("scheduled_for"))
    schedule = recurrence.of_job(job)
    chained = [e for e in pending if schedule and e.origin == Origin.SCHEDULE and e.attempt == 1]
    # Retries, triggered runs and one-offs' runs are outside the policies: each runs when due.
    others = sorted(e.scheduled_for for e in pending if e not in chained and e.available_at <= now)
    if chained and schedule is not None:
        result = misfire.catch_up(
            policy=job.misfire_policy,
            pending=chained[-1].scheduled_for,
            now=now,
            grace=grace,
            fires_between=schedule.fires_between,
            next_fire=schedule.next_fire,
            limit=limit,
            window=misfire.window_of(job.catchup_window_sec),
        )
        # An older pending fire than the chain's (rare: a backfill paused midway) is claimed alone.
        for e in chained[:-1]:
            late = misfire.skips(
                policy=job.misfire_policy,
                scheduled_for=e.scheduled_for,
                now=now,
                grace=grace,
                window=misfire.window_of(job.catchup_window_sec),
                next_fire=schedule.next_fire,
            )
            (result.skipped if late else others).append(e.scheduled_for)
            if late:
                result = dataclasses.replace(result, skip_count=result.skip_count + 1)
    else:
        ahead = (e.scheduled_for for e in pending if e.available_at > now)
        result = misfire.CatchUp([], [], 0, 0, False, next(ahead, None))
    runs = sorted([*others, *result.runs])
    result = dataclasses.replace(
        result,
        runs=runs[:limit],
        skipped=sorted(result.skipped)[:limit],
        run_count=result.run_count + len(others),
    )
    return ResumePreview(job=job, policy=job.misfire_policy, at=now, misfire_grace=grace, catch_up=result)


@dataclass(frozen=True)
class PoolOverview:
    pool: str
    workers: int
    slots: int
    busy: int
    queued: int
    running: int
    due_backlog: int  # due and waiting for a slot (readmodels/backlog.py)
    oldest_due_at: datetime | None  # of the backlog
    paused_due: int  # due and held by a paused job or pool: no worker would run it


def pool_overviews(*, scope: list[int] | None, now: datetime) -> list[PoolOverview]:
    """Per pool: its live workers and their slots (shared by every tenant, so shown whole), and
    the work admitted in it and due for it (the backlog, and apart what pauses hold), counted
    over the tenants of `scope` (None: all)."""
    capacity = registry.capacity(now)
    executions = Execution.objects.all() if scope is None else Execution.objects.filter(tenant_id__in=scope)
    admitted: dict[tuple[str, str], int] = {
        (pool, state): n
        for pool, state, n in executions.filter(in_states(["QUEUED", "RUNNING"]))
        .values_list("pool", "state")
        .annotate(n=Count("id"))
        .order_by()
    }
    due = due_work(executions, now=now)
    pools = sorted(set(job_registry.pools()) | set(capacity) | {p for p, _ in admitted} | set(due))
    empty = registry.Capacity(0, 0, 0)
    return [
        PoolOverview(
            pool=pool,
            workers=capacity.get(pool, empty).workers,
            slots=capacity.get(pool, empty).slots,
            busy=capacity.get(pool, empty).busy,
            queued=admitted.get((pool, "QUEUED"), 0),
            running=admitted.get((pool, "RUNNING"), 0),
            due_backlog=due.get(pool, NO_DUE).backlog,
            oldest_due_at=due.get(pool, NO_DUE).oldest,
            paused_due=due.get(pool, NO_DUE).paused,
        )
        for pool in pools
    ]
