"""The upcoming-fires view: the next 24 h of fires in 15-minute buckets, from each job's schedule
in its timezone, scoped to the caller's tenants, beside the pools' capacity; bounded expansion."""

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.upcoming import fires as upcoming
from dashboard.upcoming.fires import BUCKET, BUCKETS, upcoming_fires
from pools import registry

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 26, 21, 7, tzinfo=UTC)


def _bucket_at(fires, when: datetime):
    return next(b for b in fires.buckets if b.start <= when < b.start + BUCKET)


def test_a_midnight_herd_shows_in_its_bucket_with_its_jobs(tenant, make_job):
    """30 jobs on `0 0 * * *`: one bucket of 30 fires, its jobs listed (25 by name, "and 5 more");
    an hourly job fires 24 times in the window; a one-off once."""
    for i in range(30):
        make_job(tenant, type="CRON", schedule="0 0 * * *", name=f"export-{i:02}", now=NOW)
    make_job(tenant, type="CRON", schedule="30 * * * *", name="hourly", now=NOW)
    make_job(tenant, type="ONCE", run_at=NOW + timedelta(hours=2), name="once", now=NOW)

    fires = upcoming_fires(scope=None, now=NOW)

    midnight = _bucket_at(fires, datetime(2026, 11, 27, 0, 0, tzinfo=UTC))
    assert midnight.count == 30 and midnight.jobs_total == 30
    assert len(midnight.jobs) == 25 and midnight.jobs_more == 5
    assert fires.peak is midnight
    assert fires.total == 30 + 24 + 1
    assert not fires.truncated
    assert fires.start == datetime(2026, 11, 26, 21, 0, tzinfo=UTC)


def test_every_fire_of_the_next_24_hours_is_shown_whatever_the_minute(tenant, make_job):
    """Seen from 00:05, tomorrow's midnight herd is 23 h 55 min away: it is on the page, in its last
    bucket (the first starts at 00:00, before now), and so is every fire up to 24 hours from now."""
    at = datetime(2026, 11, 27, 0, 5, tzinfo=UTC)
    make_job(tenant, type="CRON", schedule="0 0 * * *", name="export", now=at)
    make_job(tenant, type="ONCE", run_at=at + timedelta(hours=24), name="a day on", now=at)

    fires = upcoming_fires(scope=None, now=at)

    assert fires.buckets[-1].start == datetime(2026, 11, 28, 0, 0, tzinfo=UTC)
    assert fires.buckets[-1].count == 2
    assert fires.total == 2


def test_fires_follow_the_jobs_timezone(tenant, make_job):
    """Midnight in Tokyo is 15:00 UTC."""
    make_job(tenant, type="CRON", schedule="0 0 * * *", timezone="Asia/Tokyo", now=NOW)

    fires = upcoming_fires(scope=None, now=NOW)

    assert _bucket_at(fires, datetime(2026, 11, 27, 15, 0, tzinfo=UTC)).count == 1
    assert fires.total == 1


def test_paused_and_other_tenants_jobs_are_not_counted(tenant, other_tenant, make_job):
    from scheduling.job_changes import job_pause

    make_job(tenant, type="CRON", schedule="0 0 * * *", now=NOW)
    job_pause(job=make_job(tenant, type="CRON", schedule="0 0 * * *", now=NOW), now=NOW)
    make_job(other_tenant, type="CRON", schedule="0 0 * * *", now=NOW)

    assert upcoming_fires(scope=[tenant.pk], now=NOW).total == 1
    assert upcoming_fires(scope=None, now=NOW).total == 2


def test_a_pool_with_fewer_slots_than_its_busiest_bucket_is_flagged(tenant, make_job):
    for _ in range(5):
        make_job(tenant, type="CRON", schedule="0 0 * * *", pool="default", now=NOW)
    registry.register(hostname="w1", pid=1, pools=["default"], slots=4, now=NOW)

    pools = {p.pool: p for p in upcoming_fires(scope=None, now=NOW).pools}

    assert (pools["default"].peak, pools["default"].capacity.slots, pools["default"].over) == (5, 4, True)
    assert pools["default"].peak_at == datetime(2026, 11, 27, 0, 0, tzinfo=UTC)


def test_an_every_minute_job_is_counted_to_the_end_of_the_day(tenant, make_job):
    """Every fire of the 24 hours, not the first 288 (which ended the bars at about 11:00 and drew
    a cliff that was not there): 15 in each bucket after the first, whose first 8 minutes are
    past; and nothing is called a lower bound."""
    make_job(tenant, type="CRON", schedule="* * * * *", now=NOW)

    fires = upcoming_fires(scope=None, now=NOW)

    assert [b.count for b in fires.buckets] == [7] + [15] * (BUCKETS - 1)  # 21:08 to 21:14, then all
    assert fires.total == 7 + 15 * (BUCKETS - 1)
    assert not fires.truncated


def test_an_interval_job_is_counted_on_its_grid(tenant, make_job):
    """Every 5 minutes from 21:02 UTC: its first fire in the first bucket (21:00-21:15, after
    now: 21:12), then three a bucket, to the end of the 24 hours."""
    start = NOW - timedelta(minutes=5)  # 21:02
    make_job(tenant, type="INTERVAL", every_sec=300, start_at=start, now=NOW)

    fires = upcoming_fires(scope=None, now=NOW)

    assert [b.count for b in fires.buckets[:3]] == [1, 3, 3]
    # 21:12, 21:17, … up to the window's end (the 97th bucket ends at 21:15 the next day).
    assert fires.total == 289


def test_a_workflows_fire_counts_in_each_of_its_steps_pools(tenant, make_job):
    """No blank pool: a workflow job has no pool of its own; its fire starts one execution per
    step, each in the step's pool (two in `etl`, one in `default` here)."""
    steps = [
        {"name": "extract", "target": {"pool": "etl", "handler": "noop"}, "payload": {}, "depends_on": []},
        {"name": "clean", "target": {"pool": "etl", "handler": "noop"}, "payload": {}, "depends_on": ["extract"]},
        {"name": "load", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["clean"]},
    ]
    workflow = {"pool": "", "handler": "", "workflow": {"steps": steps}}
    make_job(tenant, type="CRON", schedule="0 0 * * *", name="nightly", now=NOW, **workflow)
    registry.register(hostname="w1", pid=1, pools=["etl"], slots=4, now=NOW)

    fires = upcoming_fires(scope=None, now=NOW)

    pools = {p.pool: p for p in fires.pools}
    assert set(pools) == {"etl", "default"}
    assert (pools["etl"].fires, pools["etl"].peak, pools["etl"].over) == (2, 2, False)
    assert (pools["default"].fires, pools["default"].capacity) == (1, None)
    midnight = _bucket_at(fires, datetime(2026, 11, 27, 0, 0, tzinfo=UTC))
    assert midnight.count == 1 and midnight.per_pool == {"etl": 2, "default": 1}
    assert [(j.name, j.pools) for j in midnight.jobs] == [("nightly", ["etl", "default"])]


def test_schedules_past_the_bound_count_their_next_fire_and_the_page_says_so(tenant, make_job, monkeypatch):
    """Past MAX_SCHEDULES distinct schedules, a schedule counts only its pending fire: the counts
    are lower bounds, and marked so; the ones within the bound are whole."""
    monkeypatch.setattr(upcoming, "MAX_SCHEDULES", 1)
    make_job(tenant, type="CRON", schedule="10 * * * *", name="first", now=NOW)
    make_job(tenant, type="CRON", schedule="20 * * * *", name="second", now=NOW)

    fires = upcoming_fires(scope=None, now=NOW)

    assert fires.truncated
    assert fires.total == 25 + 1  # the first's every hour (21:10 to 21:10 tomorrow), the second's next fire


def test_the_page_lists_a_clicked_buckets_jobs(member_client, tenant, other_tenant, make_job):
    # Daily at an hour some six hours ahead of the real clock the page reads: inside its 24 hours
    # (which start at the current bucket) whatever the time of day, as midnight is not at 00:05.
    schedule = f"0 {(datetime.now(UTC) + timedelta(hours=6)).hour} * * *"
    make_job(tenant, type="CRON", schedule=schedule, name="ours")
    make_job(other_tenant, type="CRON", schedule=schedule, name="theirs")

    page = member_client.get("/dashboard/upcoming/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "ours" in body and "theirs" not in body
    chosen = page.context["chosen"]
    assert chosen.count == 1

    other = (chosen.index + 1) % 96
    assert member_client.get("/dashboard/upcoming/", {"bucket": other}).context["chosen"].index == other
    assert member_client.get("/dashboard/upcoming/", {"bucket": "nope"}).context["chosen"].index == chosen.index
    assert member_client.get("/dashboard/upcoming/", {"bucket": "999"}).status_code == 200


def test_a_one_off_counts_while_its_first_run_waits_and_not_once_it_has_ended(tenant, make_job, drive):
    """A one-off's fire is its first attempt still waiting: one cancelled before its time, whose job
    reads COMPLETED with its next fire as it was made (executions/standing.py), counts nothing;
    a workflow's root steps waiting together are one fire of their job."""
    waiting = make_job(tenant, type="ONCE", run_at=NOW + timedelta(hours=2), name="waiting", now=NOW)
    ended = make_job(tenant, type="ONCE", run_at=NOW + timedelta(hours=3), name="ended", now=NOW)
    drive(ended.executions.get(), "CANCELLED")
    steps = [
        {"name": root, "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []}
        for root in ("a", "b")
    ]
    make_job(
        tenant, type="ONCE", run_at=NOW + timedelta(hours=4), name="flow", pool="", handler="",
        workflow={"steps": steps}, now=NOW,
    )  # fmt: skip

    fires = upcoming_fires(scope=None, now=NOW)

    assert _bucket_at(fires, waiting.run_at).count == 1
    assert _bucket_at(fires, ended.run_at).count == 0
    assert _bucket_at(fires, NOW + timedelta(hours=4)).jobs_total == 1
