"""The upcoming-fires view: the next 24 h of fires in 15-minute buckets, from each job's schedule
in its timezone, scoped to the caller's tenants, beside the pools' capacity; bounded expansion."""

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.upcoming import BUCKET, MAX_FIRES_PER_SCHEDULE, upcoming_fires
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
    from executions.scheduling import job_pause

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


def test_an_every_minute_job_is_expanded_only_so_far_and_says_so(tenant, make_job):
    make_job(tenant, type="CRON", schedule="* * * * *", now=NOW)

    fires = upcoming_fires(scope=None, now=NOW)

    assert fires.total == MAX_FIRES_PER_SCHEDULE + 1  # its pending fire, then the bounded expansion
    assert fires.truncated


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
