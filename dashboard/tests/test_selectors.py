"""The dashboard's reads: scoping, the merged per-state walk, capped counts, the last hour."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dashboard import selectors
from dashboard.executions import listing as pages
from dashboard.live import reads as live_reads
from executions import transitions
from executions.models import Execution
from scheduling.job_changes import job_pause

pytestmark = pytest.mark.django_db
NOW = timezone.now


def _mixed(tenant, other_tenant, make_job, drive) -> list[Execution]:
    now = timezone.now()
    made = []
    for i, target in enumerate(["PENDING", "SUCCEEDED", "DEAD", "CANCELLED", "RUNNING", "QUEUED"] * 2):
        owner = tenant if i % 3 else other_tenant
        job = make_job(
            owner, run_at=now + timedelta(minutes=i * 7 % 11), handler="fail" if target == "DEAD" else "noop"
        )
        execution = job.executions.get()
        made.append(execution if target == "PENDING" else drive(execution, target))
    return made


@pytest.mark.parametrize("scope_name", ["staff", "member"])
def test_the_merged_walk_pages_like_a_plain_order_by(tenant, other_tenant, make_job, drive, monkeypatch, scope_name):
    """Merging one ordered walk per state (and tenant) gives the same pages as ORDER BY
    updated_at DESC (latest activity first) over the scope, every row exactly once, whether
    paged by number or by cursor."""
    monkeypatch.setattr(pages, "PAGE_SIZE", 5)
    _mixed(tenant, other_tenant, make_job, drive)
    scope = None if scope_name == "staff" else [tenant.pk]
    expected = list(
        Execution.objects.filter(**({} if scope is None else {"tenant_id__in": scope}))
        .order_by("-updated_at", "-id")
        .values_list("id", flat=True)
    )

    seen, page, has_next = [], 1, True
    while has_next:
        result = pages.execution_page(scope=scope, filters=pages.ExecutionFilters(), page=page, now=NOW())
        seen += [row.pk for row in result.rows]
        has_next = result.has_next
        page += 1
    assert seen == expected

    by_cursor, after = [], None
    while True:
        filters = pages.ExecutionFilters(after=pages.parse_cursor(after) if after else None)
        result = pages.execution_page(scope=scope, filters=filters, page=1, now=NOW())
        by_cursor += [row.pk for row in result.rows]
        if not result.next_after:
            break
        after = result.next_after
    assert by_cursor == expected


def test_cursor_pages_stay_correct_while_rows_change(tenant, other_tenant, make_job, drive, monkeypatch):
    """A row that moves (new activity) between two pages is not shown twice, and no row that
    stayed is skipped: the next page starts after the last row shown, not at an offset."""
    monkeypatch.setattr(pages, "PAGE_SIZE", 4)
    _mixed(tenant, other_tenant, make_job, drive)
    first = pages.execution_page(scope=None, filters=pages.ExecutionFilters(), page=1, now=NOW())
    stayed = list(Execution.objects.order_by("-updated_at", "-id").values_list("id", flat=True)[len(first.rows) :])
    # The newest row shown moves on (new activity), and an older one not yet shown too.
    Execution.objects.filter(pk__in=[first.rows[0].pk, stayed[-1]]).update(
        updated_at=timezone.now() + timedelta(hours=1)
    )
    stayed.remove(stayed[-1])

    seen, after = [], first.next_after
    while after:
        result = pages.execution_page(
            scope=None,
            filters=pages.ExecutionFilters(after=pages.parse_cursor(after)),
            page=2,
            now=NOW(),
        )
        seen += [row.pk for row in result.rows]
        after = result.next_after
    assert seen == stayed


def test_the_walk_applies_state_pool_and_time_filters(tenant, other_tenant, make_job, drive):
    made = _mixed(tenant, other_tenant, make_job, drive)
    dead = {e.pk for e in made if e.state == "DEAD"}
    rows = pages.execution_page(scope=None, filters=pages.ExecutionFilters(state="DEAD"), page=1, now=NOW()).rows
    assert {r.pk for r in rows} == dead
    none = pages.execution_page(scope=None, filters=pages.ExecutionFilters(pool="elsewhere"), page=1, now=NOW())
    assert none.rows == [] and not none.gave_up
    # The time range is the latest activity's.
    quiet = [e.pk for e in made[:3]]
    Execution.objects.filter(pk__in=quiet).update(updated_at=timezone.now() - timedelta(hours=2))
    since = timezone.now() - timedelta(hours=1)
    rows = pages.execution_page(scope=None, filters=pages.ExecutionFilters(since=since), page=1, now=NOW()).rows
    assert {r.pk for r in rows} == {e.pk for e in made} - set(quiet)
    until = pages.ExecutionFilters(until=since)
    assert {r.pk for r in pages.execution_page(scope=None, filters=until, page=1, now=NOW()).rows} == set(quiet)


def test_a_scope_with_no_tenants_sees_nothing(tenant, make_job):
    make_job(tenant)
    empty = pages.execution_page(scope=[], filters=pages.ExecutionFilters(), page=1, now=NOW())
    assert (empty.rows, empty.has_next) == ([], False)
    assert [c.count for c in selectors.execution_state_counts(scope=[])] == [0] * len(selectors.STATE_ORDER)


def test_counts_are_exact_up_to_the_cap_then_estimated(tenant, make_job):
    """Above the cap a count is the planner's estimate, flagged as inexact, never below cap+1."""
    for _ in range(5):
        make_job(tenant)
    pending = Execution.objects.filter(state="PENDING")
    assert selectors.capped_count(pending, cap=10) == (5, True)
    count, exact = selectors.capped_count(pending, cap=2)
    assert not exact and count >= 3


def test_the_overviews_state_counts_are_exact_up_to_the_cap_then_estimated(tenant, make_job, monkeypatch):
    for _ in range(5):
        make_job(tenant)
    monkeypatch.setattr(selectors, "EXACT_COUNT_CAP", 2)
    counts = {c.state: c for c in selectors.execution_state_counts(scope=[tenant.pk])}
    assert not counts["PENDING"].exact and counts["PENDING"].count >= 3
    assert (counts["RUNNING"].count, counts["RUNNING"].exact) == (0, True)
    monkeypatch.setattr(selectors, "EXACT_COUNT_CAP", 5)
    assert {c.state: c.count for c in selectors.execution_state_counts(scope=None)}["PENDING"] == 5


def test_state_counts_follow_the_scope(tenant, other_tenant, make_job, drive):
    _mixed(tenant, other_tenant, make_job, drive)
    staff = {c.state: c.count for c in selectors.execution_state_counts(scope=None)}
    member = {c.state: c.count for c in selectors.execution_state_counts(scope=[tenant.pk])}
    assert sum(staff.values()) == 12
    assert sum(member.values()) == 8
    assert staff["DEAD"] == 2


def test_last_hour_counts_outcomes_per_minute_and_start_lag(tenant, make_job, drive):
    """Finished executions are counted in the minute they finished; the lag is started_at -
    available_at, per minute of start and over the hour (p50, p99)."""
    now = datetime(2030, 1, 1, 12, 30, 30, tzinfo=UTC)
    lags = [0.1, 0.2, 0.3, 10.0]
    for i, lag in enumerate(lags):
        execution = drive(make_job(tenant).executions.get(), "SUCCEEDED")
        started = now - timedelta(minutes=10 - i)
        Execution.objects.filter(pk=execution.pk).update(
            available_at=started - timedelta(seconds=lag),
            started_at=started,
            finished_at=started + timedelta(seconds=1),
        )
    old = drive(make_job(tenant).executions.get(), "SUCCEEDED")
    Execution.objects.filter(pk=old.pk).update(
        finished_at=now - timedelta(hours=2), started_at=now - timedelta(hours=2)
    )
    dead = drive(make_job(tenant, handler="fail").executions.get(), "DEAD")
    Execution.objects.filter(pk=dead.pk).update(finished_at=now - timedelta(minutes=1), started_at=None)

    hour = selectors.last_hour(scope=[tenant.pk], now=now)

    assert len(hour.minutes) == 60
    assert hour.minutes[-1].at == datetime(2030, 1, 1, 12, 30, tzinfo=UTC)
    assert hour.finished == 5
    assert sum(m.failed for m in hour.minutes) == 1
    assert hour.started == 4
    assert hour.lag_p50_ms == pytest.approx(250, abs=1)
    assert hour.lag_p99_ms == pytest.approx(9709, abs=1)
    first = next(m for m in hour.minutes if m.at == datetime(2030, 1, 1, 12, 20, tzinfo=UTC))
    assert first.lag_p50_ms == pytest.approx(100, abs=1)
    assert selectors.last_hour(scope=[], now=now).finished == 0


def test_queue_depth_is_pending_due_plus_queued_per_pool(tenant, make_job, drive):
    now = timezone.now()
    make_job(tenant, run_at=now - timedelta(seconds=5))  # due
    make_job(tenant, run_at=now + timedelta(hours=1))  # not yet due
    drive(make_job(tenant).executions.get(), "QUEUED")
    drive(make_job(tenant).executions.get(), "RUNNING")

    (default,) = [p for p in selectors.queue_depths(scope=None, now=now) if p.pool == "default"]

    assert (default.pending_due, default.queued, default.running, default.depth) == (1, 1, 1, 2)


def test_next_fires_are_given_in_utc_and_in_the_jobs_zone(tenant, make_job):
    """Across the spring-forward in New York, local offsets change while UTC stays exact."""
    after = datetime(2027, 3, 12, 12, tzinfo=UTC)
    job = make_job(tenant, type="CRON", schedule="30 1 * * *", timezone="America/New_York", now=after)
    fires = selectors.next_fires(job=job, now=after, count=3)
    assert [f.local.strftime("%m-%d %H:%M %z") for f in fires] == [
        "03-13 01:30 -0500",
        "03-14 01:30 -0500",
        "03-15 01:30 -0400",
    ]
    assert fires[0].utc == datetime(2027, 3, 13, 6, 30, tzinfo=UTC)


def test_live_events_are_scoped_and_ordered(tenant, other_tenant, make_job):
    """The events since a time of the executions whose history is derived (a happy run has no
    rows: store/history.py), and the rows past an id, each in the caller's scope, oldest first."""
    start = live_reads.latest_event_id()
    since = timezone.now() - timedelta(seconds=1)
    mine = make_job(tenant).executions.get()
    theirs = make_job(other_tenant).executions.get()

    member = live_reads.live_derived_since(scope=[tenant.pk], since=since)
    staff = live_reads.live_derived_since(scope=None, since=since)

    assert [(e["executionId"], e["id"], e["to"], e["tenantId"]) for e in member] == [
        (str(mine.pk), None, "PENDING", tenant.pk)
    ]
    assert len(staff) == 2 and staff[0]["_at"] <= staff[1]["_at"]
    assert live_reads.live_events_after(scope=None, after=start) == []

    for execution in (mine, theirs):  # off the happy path: the history is rows from here
        assert transitions.cancel(execution_id=execution.pk, now=timezone.now(), reason="test")
    member = live_reads.live_events_after(scope=[tenant.pk], after=start)
    staff = live_reads.live_events_after(scope=None, after=start)

    assert [(e["executionId"], e["from"], e["to"]) for e in member] == [
        (str(mine.pk), "", "PENDING"),
        (str(mine.pk), "PENDING", "CANCELLED"),
    ]
    assert len(staff) == 4 and [e["id"] for e in staff] == sorted(e["id"] for e in staff)
    assert live_reads.live_derived_since(scope=None, since=since) == []


def test_a_pool_filter_over_budget_is_narrowed_to_the_last_day(tenant, make_job, monkeypatch):
    """When the walk with a pool filter trips its statement timeout, the page is retried over the
    last day and says so; when that trips too, it gives up rather than blow the page's budget."""
    from django.db import OperationalError, connection

    if connection.vendor != "postgresql":
        pytest.skip("the statement timeout is PostgreSQL's; SQLite walks without one")

    make_job(tenant)
    real = pages._execution_walk
    calls = []

    def slow_first(**kwargs):
        calls.append(kwargs["filters"].since)
        if len(calls) == 1:
            raise OperationalError("canceling statement due to statement timeout")
        return real(**kwargs)

    monkeypatch.setattr(pages, "_execution_walk", slow_first)
    now = timezone.now()
    result = pages.execution_page(scope=None, filters=pages.ExecutionFilters(pool="default"), page=1, now=now)
    assert calls == [None, now - timedelta(days=1)]
    assert result.narrowed_to == now - timedelta(days=1) and len(result.rows) == 1

    monkeypatch.setattr(pages, "_execution_walk", lambda **kw: (_ for _ in ()).throw(OperationalError("timeout")))
    result = pages.execution_page(scope=None, filters=pages.ExecutionFilters(pool="default"), page=1, now=now)
    assert result.gave_up and result.rows == []


def test_queue_depth_tells_a_paused_jobs_due_work_apart(member_client, tenant, make_job):
    """Issue 31, item 2: the overview's "Due backlog" is work waiting for a slot; a paused job's
    due execution is shown apart, as paused."""
    now = timezone.now()
    job_pause(job=make_job(tenant, run_at=now - timedelta(minutes=5), now=now), now=now)

    (default,) = [p for p in selectors.queue_depths(scope=None, now=now) if p.pool == "default"]

    assert (default.pending_due, default.depth) == (0, 0)
    assert default.paused_due == 1
    html = member_client.get("/dashboard/").content.decode()
    assert "+1 paused" in html
