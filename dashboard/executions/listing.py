"""The executions page's list: latest activity first, one search box, filters, and pages that stay
correct while rows change (a cursor, not an offset). Split from dashboard/selectors.py, whose
scoping it uses: every query starts from readmodels.selectors.execution_list(scope=…)."""

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from django.db.models import Q

from dashboard.selectors import STATE_ORDER, narrow_scope
from executions.models import Execution
from jobs.selectors import job_list
from readmodels.selectors import execution_list
from store import OverBudget, store
from web.id_search import id_span

PAGE_SIZE = 50


@dataclass(frozen=True)
class ExecutionFilters:
    state: str = ""
    pool: str = ""
    tenant: str = ""
    job: str = ""
    # A time range of the executions' latest activity (updated_at).
    since: datetime | None = None
    until: datetime | None = None
    # One search box: an execution, job or run id, whole or short (web/id_search.py); else
    # text in the job's name or handler or in the error.
    q: str = ""
    # Where the page starts (the previous page's last row): see `activity_cursor`.
    after: tuple[datetime, uuid.UUID] | None = None


@dataclass
class ExecutionPage:
    rows: list[Execution]
    has_next: bool
    # A filter no index covers (a pool, a text search, a small tenant's share) was narrowed to
    # the last day, or given up on, to keep within the page's time budget; the page says so.
    narrowed_to: datetime | None = None
    gave_up: bool = False
    # The next page's cursor (`after`), when the rows are in activity order and there is one.
    next_after: str | None = None
    # The job whose history the rows are (the `job` filter, or a job's id searched), in its
    # schedule's order; None when they are in activity order.
    history_of: uuid.UUID | None = None


# A filter no index covers (pool) may have to read far to fill a page; past this it is stopped.
UNINDEXED_FILTER_BUDGET_MS = 80
UNINDEXED_FILTER_WINDOW = timedelta(days=1)
# The rows' order by default: latest activity first (updated_at moves with every transition).
# A job's own history keeps its schedule's order: (job, scheduled_for) walks it.
ACTIVITY = ("-updated_at", "-id")
SCHEDULE = ("-scheduled_for", "-id")
# A text search looks in the executions of at most this many jobs matching it (newest first),
# besides the errors: a word common to thousands of jobs' names narrows nothing.
SEARCH_JOBS = 50


def activity_cursor(execution: Execution) -> str:
    """A page's position in activity order, for the next page's `after`: new activity moves a row
    to the top, so a cursor (unlike an offset) neither repeats a row nor skips one that stayed."""
    return f"{execution.updated_at.isoformat()}|{execution.pk}"


def parse_cursor(raw: str) -> tuple[datetime, uuid.UUID] | None:
    at, _, pk = raw.partition("|")
    try:
        when = datetime.fromisoformat(at)
        return (when if when.tzinfo else when.replace(tzinfo=UTC)), uuid.UUID(pk)
    except ValueError:
        return None


def execution_page(*, scope: list[int] | None, filters: ExecutionFilters, page: int, now: datetime) -> ExecutionPage:
    """One page of executions, latest activity first (a job's own, newest scheduled first). No
    COUNT(*).

    There is no index on updated_at alone (every index costs the dispatcher and workers a write
    on each transition), but there is (state, updated_at): the page is the merge of one short
    ordered walk per state (and per tenant, for a scoped caller), a UNION ALL of sub-queries
    that each stop after the rows the page can need, sorted together, then the page's rows
    fetched by id. The cost follows page size times the number of walks, not the size of the
    table. A search is one query over its matches: an id is an index probe; text is the matching
    jobs' executions (execution_job_fire) and the errors that contain it (a trigram index on
    PostgreSQL, where pg_trgm could be created).

    A filter checked row by row along the walks (a pool, a scoped caller's tenant, a search) can
    make a walk read far. On PostgreSQL such a query runs under a statement timeout; if it trips,
    the page is retried over the last day only, and failing that, given up.
    """
    bounded = filters.pool or filters.q or scope is not None or filters.tenant
    if not bounded or not store().bounds_statements:
        return _execution_walk(scope=scope, filters=filters, page=page)
    attempts = [filters]
    if filters.since is None or filters.since < now - UNINDEXED_FILTER_WINDOW:
        attempts.append(replace(filters, since=now - UNINDEXED_FILTER_WINDOW))
    for attempt in attempts:
        try:
            with store().statement_budget(UNINDEXED_FILTER_BUDGET_MS):
                found = _execution_walk(scope=scope, filters=attempt, page=page)
        except OverBudget:
            continue
        found.narrowed_to = attempt.since if attempt is not filters else None
        return found
    return ExecutionPage(rows=[], has_next=False, gave_up=True)


def _before(cursor: tuple[datetime, uuid.UUID]) -> Q:
    at, pk = cursor
    return Q(updated_at__lt=at) | Q(updated_at=at, id__lt=pk)


def _execution_walk(*, scope: list[int] | None, filters: ExecutionFilters, page: int) -> ExecutionPage:
    scope = narrow_scope(scope=scope, tenant_slug=filters.tenant)
    executions = execution_list(scope=scope).order_by()
    if filters.pool:
        executions = executions.filter(pool=filters.pool)
    if filters.since:
        executions = executions.filter(updated_at__gte=filters.since)
    if filters.until:
        executions = executions.filter(updated_at__lt=filters.until)
    start = 0 if filters.after else (page - 1) * PAGE_SIZE
    wanted = start + PAGE_SIZE + 1
    order = ACTIVITY
    only_state = {"state": filters.state} if filters.state else {}
    job = filters.job
    search = filters.q
    by_id = False
    if search and (span := id_span(search)) is not None:
        # An id in any form the pages show, whole or its first 8 characters or more: the
        # executions, runs' steps and jobs' histories it names (each an index range); one job's
        # alone is its history, in its schedule's order. Text that names nothing by id (8 hex
        # digits can be a word of an error) is searched as text below.
        jobs = list(job_list(scope=scope).filter(span.q("pk")).values_list("pk", flat=True)[:SEARCH_JOBS])
        named = execution_list(scope=scope).filter(span.q("pk") | span.q("run_id")).exists()
        if len(jobs) == 1 and not named:
            job, search = str(jobs[0]), ""
        elif jobs or named:
            executions = executions.filter(span.q("pk") | span.q("run_id") | Q(job_id__in=jobs))
            search, by_id = "", True
    if filters.after and not job:
        executions = executions.filter(_before(filters.after))
    job_id = None
    if job:
        try:
            job_id = uuid.UUID(job)
        except ValueError:
            return ExecutionPage(rows=[], has_next=False)
        order = SCHEDULE
        ids = list(
            executions.filter(job_id=job_id, **only_state).order_by(*order).values_list("id", flat=True)[start:wanted]
        )
    elif search or by_id:
        if search:
            matched_jobs = list(
                job_list(scope=scope)
                .filter(Q(name__icontains=search) | Q(handler__icontains=search))
                .order_by("-created_at")
                .values_list("pk", flat=True)[:SEARCH_JOBS]
            )
            # `error <> ''` as the trigram index's predicate says it (executions migration 0012).
            has_error = Q(error__icontains=search) & ~Q(error="")
            executions = executions.filter(Q(job_id__in=matched_jobs) | has_error)
        ids = list(executions.filter(**only_state).order_by(*order).values_list("id", flat=True)[start:wanted])
    else:
        states = [filters.state] if filters.state else [s.value for s in STATE_ORDER]
        tenants = [None] if scope is None else scope
        if not tenants:
            return ExecutionPage(rows=[], has_next=False)
        walks = [
            executions.filter(state=state, **({"tenant_id": tenant} if tenant is not None else {}))
            .order_by(*order)
            .values_list("updated_at", "id")
            for state in states
            for tenant in tenants
        ]
        everything = executions.filter(state__in=states, **({"tenant_id__in": tenants} if scope is not None else {}))
        merged = store().newest_first(walks, everything.values_list("updated_at", "id"), start, wanted, order=order)
        ids = [row[1] for row in merged]
    found = execution_list(scope=scope).select_related("job", "tenant").in_bulk(ids)
    ordered = [found[i] for i in ids if i in found]
    has_next = len(ordered) > PAGE_SIZE
    rows = ordered[:PAGE_SIZE]
    next_after = activity_cursor(rows[-1]) if has_next and order == ACTIVITY and rows else None
    return ExecutionPage(rows=rows, has_next=has_next, next_after=next_after, history_of=job_id)
