"""jobs.misfire: the misfire policies as pure rules (no database). That they agree with the
dispatcher is dispatcher/tests/test_resume_preview.py's business."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import cron, misfire

EVERY_10 = "*/10 * * * *"
T0 = datetime(2027, 5, 1, 12, tzinfo=UTC)
GRACE = timedelta(seconds=60)


def plan(policy: str, pending: datetime, now: datetime, *, limit: int = 100, count_limit: int = 100_000):
    return misfire.catch_up(
        policy=policy,
        pending=pending,
        now=now,
        grace=GRACE,
        fires_between=lambda start, end, n: cron.fires_between(EVERY_10, "UTC", start, end, limit=n),
        next_fire=lambda after: cron.next_fire(EVERY_10, "UTC", after),
        limit=limit,
        count_limit=count_limit,
    )


@pytest.mark.parametrize(
    ("policy", "scheduled_for", "expected"),
    [
        ("SKIP", T0 - timedelta(seconds=61), True),
        ("SKIP", T0 - timedelta(seconds=60), False),  # exactly the grace late: still on time
        ("RUN_ONCE", T0 - timedelta(days=1), False),
        ("RUN_ALL", T0 - timedelta(days=1), False),
    ],
)
def test_skips(policy, scheduled_for, expected):
    assert misfire.skips(policy=policy, scheduled_for=scheduled_for, now=T0, grace=GRACE) is expected


def test_nothing_missed_when_the_pending_fire_is_ahead():
    result = plan("SKIP", T0 + timedelta(minutes=10), T0)
    assert result == misfire.CatchUp([], [], 0, 0, False, T0 + timedelta(minutes=10))


def test_each_policy_after_an_hour():
    pending, now = T0, T0 + timedelta(hours=1, seconds=30)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(7)]
    assert plan("RUN_ONCE", pending, now).runs == fires[:1]
    assert plan("RUN_ONCE", pending, now).skipped == fires[1:]
    assert plan("RUN_ALL", pending, now).runs == fires
    assert plan("SKIP", pending, now).skipped == fires
    assert {plan(p, pending, now).next_fire for p in ("RUN_ONCE", "RUN_ALL", "SKIP")} == {T0 + timedelta(minutes=70)}


def test_lists_are_capped_and_counts_are_lower_bounds_past_the_count_limit():
    result = plan("RUN_ALL", T0, T0 + timedelta(days=1), limit=5, count_limit=50)
    assert result.runs == [T0 + timedelta(minutes=10 * i) for i in range(5)]
    assert (result.run_count, result.capped) == (51, True)  # the pending fire and 50 counted after it


@settings(max_examples=200, deadline=None, database=None)
@given(
    policy=st.sampled_from(["RUN_ONCE", "RUN_ALL", "SKIP"]),
    late=st.integers(0, 3 * 86400),
    step=st.integers(0, 599),
)
def test_every_due_fire_is_run_or_skipped_once(policy, late, step):
    pending = T0 + timedelta(minutes=10)
    now = pending + timedelta(seconds=late + step)
    result = plan(policy, pending, now, limit=10**6)
    due = [pending, *cron.fires_between(EVERY_10, "UTC", pending, now, limit=10**6)]
    assert sorted(result.runs + result.skipped) == due
    assert result.runs == sorted(result.runs) and result.skipped == sorted(result.skipped)
    assert (result.run_count, result.skip_count) == (len(result.runs), len(result.skipped))
    assert result.next_fire is not None and result.next_fire > now
    assert len(result.runs) == {"RUN_ALL": len(due), "RUN_ONCE": 1}.get(policy, 0 if now - pending > GRACE else 1)
