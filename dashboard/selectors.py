"""Reads for the operator dashboard. Every function takes `scope` (tenant ids, or None for staff,
as tenants.selectors.scope_of returns it) and starts from the scoped selectors of jobs and
executions, so no query here can see another tenant's rows.

Each read is shaped to stay cheap with millions of executions (the budget is 300 ms a page):
no COUNT(*) over a whole state, no sort of the whole table. The comment on each says which
index bounds it.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import TruncMinute

from audit.models import ActorKind, AuditEntry
from executions import history, standing
from executions.models import Execution, ExecutionEvent
from executions.states import TERMINAL, ExecutionState
from jobs import cron, recurrence
from jobs.models import Job
from jobs.selectors import job_list
from jobs.states import InvalidJobTransition, JobState
from readmodels.backlog import due_work
from readmodels.last_runs import failing
from readmodels.selectors import execution_list, job_resume_preview
from readmodels.start_lag import could_run_from
from store import store
from tenants.models import Tenant
from web.id_search import id_span

S = ExecutionState
# Up to this many rows a state's count is exact (an index-only walk of at most this many
# entries); above it the page shows the planner's estimate, marked as approximate.
EXACT_COUNT_CAP = 10_000
PAGE_SIZE = 50
# Execution states in the order the pages show them: the flow, then the failure states. Every
# state must be here: the executions page walks one index range per state listed.
STATE_ORDER = [
    S.BLOCKED,
    S.PENDING,
    S.QUEUED,
    S.RUNNING,
    S.SUCCEEDED,
    S.FAILED,
    S.TIMED_OUT,
    S.FAILED_WORKER_LOST,
    S.CANCELLED,
    S.DEAD,
    S.DISCARDED,
]


# --- Tenants ---------------------------------------------------------------------------------------


def tenants_in_scope(*, scope: list[int] | None) -> list[Tenant]:
    tenants = Tenant.objects.order_by("slug")
    return list(tenants if scope is None else tenants.filter(pk__in=scope))


def narrow_scope(*, scope: list[int] | None, tenant_slug: str | None) -> list[int] | None:
    """The scope further limited to one tenant named by a filter; a tenant outside the scope
    narrows it to nothing rather than widening it."""
    if not tenant_slug:
        return scope
    tenant_id = Tenant.objects.filter(slug=tenant_slug).values_list("pk", flat=True).first()
    if tenant_id is None or (scope is not None and tenant_id not in scope):
        return []
    return [tenant_id]


# --- Counts ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateCount:
    state: str
    count: int
    exact: bool


def capped_count(queryset: QuerySet, *, cap: int = EXACT_COUNT_CAP, estimate: bool = True) -> tuple[int, bool]:
    """(count, exact): exact up to `cap` rows; above it the planner's estimate (at least
    cap + 1), or just cap + 1 when `estimate` is False."""
    count = queryset.order_by()[: cap + 1].count()
    if count <= cap:
        return count, True
    guess = store().estimate_rows(queryset.order_by()) if estimate else None
    return max(guess or 0, cap + 1), False


def execution_state_counts(*, scope: list[int] | None) -> list[StateCount]:
    """Per state, one walk of the (state, scheduled_for) or (tenant, state, scheduled_for)
    index (on PostgreSQL QUEUED and RUNNING: their own partial indexes), stopped after
    EXACT_COUNT_CAP entries; the planner's estimate for a state past it.

    The walks are one statement, a scalar subquery per state: the overview reads this on every
    load, and a dozen statements, a round trip each, were a sixth of its time (profiled)."""
    if scope == []:
        return [StateCount(state=state, count=0, exact=True) for state in STATE_ORDER]
    executions = execution_list(scope=scope).order_by()
    walks = [executions.filter(state=state).values("pk")[: EXACT_COUNT_CAP + 1] for state in STATE_ORDER]
    row = store().walk_counts(walks)
    counts = []
    for state, count in zip(STATE_ORDER, row, strict=True):
        if count <= EXACT_COUNT_CAP:
            counts.append(StateCount(state=state, count=count, exact=True))
        else:
            guess = store().estimate_rows(executions.filter(state=state))
            counts.append(StateCount(state=state, count=max(guess or 0, count), exact=False))
    return counts


def job_state_counts(*, scope: list[int] | None) -> dict[str, int]:
    """Jobs are few next to their executions; one grouped pass over (tenant, state) suffices,
    and a probe of each ACTIVE one-off's executions for those that read COMPLETED."""
    return standing.counts(job_list(scope=scope))


# --- The last hour ----------------------------------------------------------------------------------


@dataclass
class Minute:
    at: datetime
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    lag_p50_ms: float | None = None
    lag_p99_ms: float | None = None

    @property
    def total(self) -> int:
        return self.succeeded + self.failed + self.cancelled


@dataclass
class LastHour:
    minutes: list[Minute]
    finished: int
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    started: int

    def chart_data(self) -> dict[str, Any]:
        return {
            "minutes": [m.at.strftime("%H:%M") for m in self.minutes],
            "succeeded": [m.succeeded for m in self.minutes],
            "failed": [m.failed for m in self.minutes],
            "cancelled": [m.cancelled for m in self.minutes],
            "p50": [m.lag_p50_ms for m in self.minutes],
            "p99": [m.lag_p99_ms for m in self.minutes],
        }


def last_hour(*, scope: list[int] | None, now: datetime) -> LastHour:
    """Executions finished per minute (by outcome) and the start lag (from when the work could
    first run: readmodels/start_lag.py) per minute of start, over the 60 minutes before `now`.

    Both read a bounded range of the partial index on finished_at; runs still going are the
    RUNNING rows (their own partial index). Nothing older than the hour is touched.
    """
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = end - timedelta(minutes=60)
    minutes = {since + timedelta(minutes=i): Minute(at=since + timedelta(minutes=i)) for i in range(60)}
    executions = execution_list(scope=scope).order_by()

    finished = (
        executions.filter(finished_at__gte=since, finished_at__lt=end, state__in=TERMINAL)
        .annotate(minute=TruncMinute("finished_at"))
        .values("minute", "state")
        .annotate(n=Count("id"))
    )
    for row in finished:
        minute = minutes.get(row["minute"])
        if minute is None:
            continue
        if row["state"] == S.SUCCEEDED:
            minute.succeeded += row["n"]
        elif row["state"] == S.DEAD:
            minute.failed += row["n"]
        else:
            minute.cancelled += row["n"]

    started = executions.filter(
        Q(finished_at__gte=since, finished_at__lt=end, state__in=TERMINAL) | Q(state=S.RUNNING),
        started_at__gte=since,
        started_at__lt=end,
    )
    per_minute, (started_count, p50, p99) = store().start_lags(started, could_run_from=could_run_from())
    for at, (minute_p50, minute_p99) in per_minute.items():
        if at in minutes:
            minutes[at].lag_p50_ms, minutes[at].lag_p99_ms = _ms(minute_p50), _ms(minute_p99)
    lag_p50, lag_p99 = _ms(p50), _ms(p99)

    ordered = [minutes[at] for at in sorted(minutes)]
    return LastHour(
        minutes=ordered,
        finished=sum(m.total for m in ordered),
        lag_p50_ms=lag_p50,
        lag_p99_ms=lag_p99,
        started=started_count,
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(max(seconds, 0.0) * 1000, 1)


# --- Pools ----------------------------------------------------------------------------------------


@dataclass
class PoolDepth:
    pool: str
    pending_due: int = 0  # the due backlog: due, waiting for a slot
    paused_due: int = 0  # due, held by a paused job or pool: no queue for the workers
    queued: int = 0
    running: int = 0

    @property
    def depth(self) -> int:
        return self.pending_due + self.queued


def queue_depths(*, scope: list[int] | None, now: datetime) -> list[PoolDepth]:
    """Per pool: the due backlog and apart what pauses hold (readmodels/backlog.py, on the due
    index), QUEUED (the republish index), RUNNING (the lease index). Each partial index holds
    only live work, so the cost follows the backlog, never the history."""
    from jobs import registry

    executions = execution_list(scope=scope).order_by()
    pools: dict[str, PoolDepth] = {name: PoolDepth(pool=name) for name in registry.pools()}

    def add(queryset: QuerySet, attr: str) -> None:
        for row in queryset.values("pool").annotate(n=Count("id")):
            depth = pools.setdefault(row["pool"], PoolDepth(pool=row["pool"]))
            setattr(depth, attr, row["n"])

    for pool, due in due_work(executions, now=now).items():
        depth = pools.setdefault(pool, PoolDepth(pool=pool))
        depth.pending_due, depth.paused_due = due.backlog, due.paused
    add(executions.filter(state=S.QUEUED), "queued")
    add(executions.filter(state=S.RUNNING), "running")
    return sorted(pools.values(), key=lambda p: p.pool)


# --- Jobs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobFilters:
    q: str = ""
    state: str = ""
    type: str = ""
    pool: str = ""
    handler: str = ""
    tenant: str = ""
    failing: bool = False  # only jobs whose last run ended DEAD (readmodels.last_runs.failing)

    @classmethod
    def of(cls, query: Any) -> "JobFilters":
        """The filters a request's query string names."""
        return cls(
            q=query.get("q", "").strip(),
            state=query.get("state", ""),
            type=query.get("type", ""),
            pool=query.get("pool", ""),
            handler=query.get("handler", ""),
            tenant=query.get("tenant", ""),
            failing=query.get("failing", "") in ("1", "true", "on"),
        )


def _last_run(scope: list[int] | None, value: str) -> Subquery:
    """The newest execution of the job that has left PENDING: a walk of (job, scheduled_for)."""
    runs = (
        execution_list(scope=scope)
        .filter(job=OuterRef("pk"))
        .exclude(state=S.PENDING)
        .order_by("-scheduled_for", "-created_at")
        .values(value)[:1]
    )
    return Subquery(runs)


def job_page(*, scope: list[int] | None, filters: JobFilters, page: int) -> tuple[list[Job], bool]:
    """One page of jobs, newest first, with their last run; (jobs, has_next). No COUNT(*)."""
    jobs = job_list(scope=narrow_scope(scope=scope, tenant_slug=filters.tenant))
    if filters.q:
        # Part of its name, or its id in any form the pages show (web/id_search.py).
        matches = Q(name__icontains=filters.q)
        if (span := id_span(filters.q)) is not None:
            matches |= span.q("pk")
        jobs = jobs.filter(matches)
    if filters.state:
        jobs = jobs.filter(standing.jobs_in([filters.state]))
    if filters.type:
        jobs = jobs.filter(type=filters.type)
    if filters.pool:
        jobs = jobs.filter(pool=filters.pool)
    if filters.handler:
        jobs = jobs.filter(handler=filters.handler)
    if filters.failing:
        jobs = failing(jobs)
    jobs = jobs.annotate(
        last_run_id=_last_run(scope, "id"),
        last_run_state=_last_run(scope, "state"),
        last_run_finished_at=_last_run(scope, "finished_at"),
        last_run_error=_last_run(scope, "error"),
    ).order_by("-created_at", "-id")
    start = (page - 1) * PAGE_SIZE
    rows: list[Job] = list(jobs[start : start + PAGE_SIZE + 1])
    standing.attach(rows[:PAGE_SIZE])
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


@dataclass(frozen=True)
class Fire:
    utc: datetime
    local: datetime


def next_fires(*, job: Job, now: datetime, count: int) -> list[Fire]:
    """The job's coming fires in UTC and in its own timezone. A one-off has at most its run_at."""
    zone = cron.parse_timezone(job.timezone or "UTC")
    schedule = recurrence.of_job(job)
    if schedule is not None:
        if job.state in (JobState.CANCELLED,):
            return []
        try:
            times = schedule.fires_after(now, count)
        except (cron.CronError, OverflowError):
            return []
        # The pending fire may be earlier than `now` (due, not yet dispatched): show it first.
        if job.next_fire_at is not None and job.next_fire_at <= now:
            times = [job.next_fire_at, *times[: count - 1]]
    else:
        times = [job.shown_next_fire_at] if job.shown_next_fire_at is not None else []
    return [Fire(utc=t, local=t.astimezone(zone)) for t in times]


def resume_question(*, job: Job, now: datetime) -> str | None:
    """The resume button's confirmation for a paused job: what resuming would run and skip (the
    API's dry run, readmodels.selectors.job_resume_preview). None when the job is not paused."""
    try:
        preview = job_resume_preview(job=job, now=now, limit=3)
    except InvalidJobTransition:
        return None
    plan = preview.catch_up
    more = "+" if plan.capped else ""

    def times(values: list[datetime], count: int) -> str:
        shown = ", ".join(v.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") for v in values)
        return f" ({shown}{', …' if count > len(values) else ''})" if values else ""

    lines = [f"Resume job “{job.name}”?"]
    if job.is_recurring:
        window = f", catchupWindowSec {job.catchup_window_sec}" if job.catchup_window_sec is not None else ""
        lines.append(f"Under misfirePolicy {preview.policy}{window}:")
    lines.append(f"would run now: {plan.run_count}{more}{times(plan.runs, plan.run_count)}")
    lines.append(f"would be skipped: {plan.skip_count}{more}{times(plan.skipped, plan.skip_count)}")
    if plan.next_fire is not None:
        lines.append(f"then next fire: {plan.next_fire.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%SZ')}")
    return "\n".join(lines)


def job_executions_page(*, scope: list[int] | None, job: Job, page: int) -> tuple[list[Execution], bool]:
    """A job's history, newest first: the (job, scheduled_for) index, offset by page."""
    executions = execution_list(scope=scope).filter(job=job).order_by("-scheduled_for", "-created_at")
    start = (page - 1) * PAGE_SIZE
    rows = list(executions[start : start + PAGE_SIZE + 1])
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


# --- Executions --------------------------------------------------------------------------------------
# The executions page's list: dashboard/executions/listing.py.


def execution_events_of(*, execution: Execution) -> list[ExecutionEvent]:
    """Its history, oldest first: rows, or told by its columns (executions/history.py)."""
    return history.timeline(execution)


@dataclass
class Attempt:
    number: int
    events: list[ExecutionEvent]
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: str = ""
    worker_id: str = ""
    message: str = ""


def attempts_of(*, events: list[ExecutionEvent]) -> list[Attempt]:
    """The history folded by attempt: when each started and ended, on which worker, and how."""
    attempts: dict[int, Attempt] = {}
    for event in events:
        attempt = attempts.setdefault(event.attempt, Attempt(number=event.attempt, events=[]))
        attempt.events.append(event)
        if event.to_state == S.RUNNING and event.from_state == S.QUEUED:
            attempt.started_at = event.at
            attempt.worker_id = event.worker_id
        if event.to_state in (*TERMINAL, S.FAILED, S.TIMED_OUT, S.FAILED_WORKER_LOST):
            attempt.ended_at = event.at
            attempt.outcome = event.to_state
            attempt.message = event.message
    return [attempts[n] for n in sorted(attempts)]


# --- Live feed and audit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditFilters:
    actor: str = ""
    action: str = ""
    outcome: str = ""
    target: str = ""
    kind: str = ""  # ActorKind: dashboard, api or admin


def audit_list(*, scope: list[int] | None) -> QuerySet[AuditEntry]:
    """Staff see every entry; a tenant member sees the entries about its tenants' objects."""
    entries = AuditEntry.objects.all()
    return entries if scope is None else entries.filter(tenant_id__in=scope)


def audit_page(*, scope: list[int] | None, filters: AuditFilters, page: int) -> tuple[list[AuditEntry], bool]:
    entries = audit_list(scope=scope)
    if filters.actor:
        entries = entries.filter(actor=filters.actor)
    if filters.action:
        entries = entries.filter(action=filters.action)
    if filters.outcome:
        entries = entries.filter(outcome=filters.outcome)
    if filters.kind:
        # The rows from before the kind was recorded (NULL) were all dashboard actions.
        kind = Q(actor_kind=filters.kind)
        entries = entries.filter(kind | Q(actor_kind__isnull=True) if filters.kind == ActorKind.DASHBOARD else kind)
    if filters.target:
        # Any target's id as typed; a job's, execution's, run's or rule's id in any form the pages
        # show (web/id_search.py); and every entry about a job so named.
        target = Q(target_id=filters.target)
        if (span := id_span(filters.target)) is not None:
            target |= span.text_q("target_id") | span.q("job_id")
        entries = entries.filter(target)
    start = (page - 1) * PAGE_SIZE
    rows = list(entries.order_by("-at", "-id")[start : start + PAGE_SIZE + 1])
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


def audit_for_job(*, scope: list[int] | None, job: Job, limit: int = 20) -> list[AuditEntry]:
    return list(audit_list(scope=scope).filter(job_id=job.pk).order_by("-at", "-id")[:limit])


def audit_for_execution(*, scope: list[int] | None, execution: Execution, limit: int = 20) -> list[AuditEntry]:
    return list(audit_list(scope=scope).filter(target_id=str(execution.pk)).order_by("-at", "-id")[:limit])
