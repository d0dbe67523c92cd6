"""What each rule is judged on, read from the store at `now` (the database's clock), then judged by
alerts/evaluation.py. Every read is bounded: a window of the finished_at index, a capped sample,
the due and state indexes. A tenant's rule reads only its tenant's rows; a global rule, all."""

from collections import Counter
from datetime import datetime, timedelta

from django.db.models import Count, Q, QuerySet

from alerts import evaluation
from alerts.evaluation import AutoPaused, Breach, DueFire
from alerts.models import AlertKind, AlertRule
from executions.models import Execution, Origin
from executions.states import ExecutionState
from jobs import registry
from jobs.models import RECURRING_TYPES, Job
from jobs.states import JobState
from pools import registry as workers
from pools import roles
from pools.models import Role
from readmodels.backlog import due_work

K = AlertKind
S = ExecutionState
# The most starts a p99 is computed over (the newest): enough for a true p99, bounded work.
LAG_SAMPLE = 10_000
# The most jobs one MISSED_FIRE (or JOB_AUTO_PAUSED) evaluation names (each its own alert), and the
# dead executions a summary names.
MISSED_FIRE_CAP = 200
EXAMPLES = 3


def breaches(rule: AlertRule, *, now: datetime) -> list[Breach]:
    """The subjects breaching `rule` at `now`."""
    threshold = rule.threshold if rule.threshold is not None else 0.0
    window = timedelta(seconds=rule.window_sec)
    if rule.kind == K.NO_WORKERS:
        return _no_workers(rule, now=now)
    if rule.kind == K.SCHEDULER_DOWN:
        found = []
        for kind in (Role.Kind.DISPATCHER, Role.Kind.SWEEPER):
            seen = roles.seen(kind, now=now, within=timedelta(seconds=threshold))
            error = next((p.last_error for p in seen.processes if p.last_error), "")
            breach = evaluation.scheduler_down(
                role=str(kind), last_seen=seen.last_seen_at, last_error=error, now=now, threshold=threshold
            )
            if breach:
                found.append(breach)
        return found
    if rule.kind == K.MISSED_FIRE:
        return evaluation.missed_fire(
            fires=_due_fires(rule, now=now, threshold=threshold), now=now, threshold=threshold
        )
    if rule.kind == K.JOB_AUTO_PAUSED:
        return evaluation.job_auto_paused(jobs=_auto_paused(rule))
    executions = _executions(rule)
    subject, where = _subject(rule)
    if rule.kind == K.FAILURE_RATE:
        counts = executions.filter(
            finished_at__gt=now - window, finished_at__lte=now, state__in=[S.SUCCEEDED, S.DEAD, S.DISCARDED]
        ).aggregate(finished=Count("id"), dead=Count("id", filter=Q(state__in=[S.DEAD, S.DISCARDED])))
        breach = evaluation.failure_rate(
            subject=subject,
            where=where,
            finished=counts["finished"],
            dead=counts["dead"],
            threshold=threshold,
            window_sec=rule.window_sec,
        )
    elif rule.kind == K.START_LAG_P99:
        since = now - window
        # As the dashboard reads starts: the finished rows through the finished_at index, and the running ones.
        started = executions.filter(
            Q(finished_at__gt=since, state__in=[S.SUCCEEDED, S.DEAD, S.CANCELLED]) | Q(state=S.RUNNING),
            started_at__gt=since,
            started_at__lte=now,
        ).order_by("-started_at")[:LAG_SAMPLE]
        lags = [
            max((started_at - available_at).total_seconds(), 0.0) * 1000
            for started_at, available_at in started.values_list("started_at", "available_at")
            if started_at is not None  # always so: the filter asks for a start in the window
        ]
        breach = evaluation.start_lag_p99(
            subject=subject, where=where, lags_ms=lags, threshold_ms=threshold, window_sec=rule.window_sec
        )
    elif rule.kind == K.DEAD_LETTER:
        dead = executions.filter(state=S.DEAD, finished_at__gt=now - window, finished_at__lte=now)
        count = dead.count()
        examples = (
            [f"{name} ({pk})" for pk, name in dead.order_by("-finished_at").values_list("pk", "job__name")[:EXAMPLES]]
            if count > threshold
            else []
        )
        breach = evaluation.dead_letter(
            subject=subject,
            where=where,
            count=count,
            threshold=threshold,
            window_sec=rule.window_sec,
            examples=examples,
        )
    else:
        raise ValueError(f"unknown kind {rule.kind}")
    return [breach] if breach else []


def _executions(rule: AlertRule) -> QuerySet[Execution]:
    executions = Execution.objects.order_by()
    if rule.tenant_id is not None:
        executions = executions.filter(tenant_id=rule.tenant_id)
    if rule.pool:
        executions = executions.filter(pool=rule.pool)
    if rule.job_id is not None:
        executions = executions.filter(job_id=rule.job_id)
    return executions


def _subject(rule: AlertRule) -> tuple[str, str]:
    """The one subject of a rule over executions, and how its summary says where."""
    if rule.job_id is not None:
        return f"job:{rule.job_id}", f" of job {rule.job.name if rule.job else rule.job_id}"
    if rule.pool:
        return f"pool:{rule.pool}", f" in pool {rule.pool}"
    return "all", "" if rule.tenant_id is None else f" of tenant {rule.tenant.slug if rule.tenant else rule.tenant_id}"


def _no_workers(rule: AlertRule, *, now: datetime) -> list[Breach]:
    pools = [rule.pool] if rule.pool else registry.pools()
    capacity = workers.capacity(now)
    executions = Execution.objects.order_by().filter(pool__in=pools)
    # What a worker would take: QUEUED, and the due backlog (not what a paused job or pool holds).
    waiting = Counter(dict(executions.filter(state=S.QUEUED).values_list("pool").annotate(n=Count("id"))))
    waiting.update({pool: due.backlog for pool, due in due_work(executions, now=now).items()})
    return evaluation.no_workers(
        pools=pools, live_workers={pool: c.workers for pool, c in capacity.items()}, waiting=waiting
    )


def _due_fires(rule: AlertRule, *, now: datetime, threshold: float) -> list[DueFire]:
    """First attempts of ACTIVE recurring (CRON and INTERVAL) jobs' scheduled fires, due more
    than `threshold` ago and not started: PENDING (no dispatcher claimed them) or QUEUED
    (claimed, and no worker took them)."""
    cutoff = now - timedelta(seconds=threshold)
    fires = Execution.objects.filter(
        state__in=[S.PENDING, S.QUEUED],
        origin=Origin.SCHEDULE,
        attempt=1,
        scheduled_for__lt=cutoff,
        job__type__in=RECURRING_TYPES,
        job__state=JobState.ACTIVE,
    )
    if rule.tenant_id is not None:
        fires = fires.filter(tenant_id=rule.tenant_id)
    if rule.job_id is not None:
        fires = fires.filter(job_id=rule.job_id)
    rows = fires.order_by("scheduled_for").values_list("job_id", "job__name", "scheduled_for", "state")[
        :MISSED_FIRE_CAP
    ]
    return [DueFire(str(job_id), name, at, state) for job_id, name, at, state in rows]


def _auto_paused(rule: AlertRule) -> list[AutoPaused]:
    """The jobs the system paused and nobody resumed: PAUSED with a reason (jobs.transitions
    .auto_pause writes it, resume clears it), at most MISSED_FIRE_CAP of them."""
    jobs = Job.objects.filter(state=JobState.PAUSED).exclude(paused_reason="")
    if rule.tenant_id is not None:
        jobs = jobs.filter(tenant_id=rule.tenant_id)
    if rule.job_id is not None:
        jobs = jobs.filter(pk=rule.job_id)
    rows = jobs.order_by("updated_at").values_list("id", "name", "paused_reason", "updated_at")[:MISSED_FIRE_CAP]
    return [AutoPaused(str(job_id), name, reason, at) for job_id, name, reason, at in rows]
