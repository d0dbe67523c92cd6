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


# --- the catch-up window (catchupWindowSec) -----------------------------------------------------


def windowed(policy: str, pending: datetime, now: datetime, window: timedelta | None, grace: timedelta = GRACE):
    return misfire.catch_up(
        policy=policy,
        pending=pending,
        now=now,
        grace=grace,
        fires_between=lambda start, end, n: cron.fires_between(EVERY_10, "UTC", start, end, limit=n),
        next_fire=lambda after: cron.next_fire(EVERY_10, "UTC", after),
        limit=10**6,
        window=window,
    )


def oracle(policy: str, pending: datetime, now: datetime, window: timedelta | None, grace: timedelta):
    """The rules as docs/misfire.md words them, over the fires listed by stepping ten minutes (no
    cron code): (runs, skipped)."""
    due = []
    fire = pending
    while fire <= now:
        due.append(fire)
        fire += timedelta(minutes=10)

    def young(fire: datetime) -> bool:  # at most the window old
        return window is None or now - fire <= window

    if policy == "RUN_ALL":  # each missed fire runs if it is young enough
        runs = [fire for fire in due if young(fire)]
    elif policy == "RUN_ONCE":  # one catch-up run, if any missed fire is young enough
        runs = due[:1] if any(young(fire) for fire in due) else []
    else:  # SKIP: the pending fire runs if it is neither past the grace nor the window
        runs = [pending] if now - pending <= grace and young(pending) else []
    return runs, [fire for fire in due if fire not in runs]


@settings(max_examples=300, deadline=None, database=None)
@given(
    policy=st.sampled_from(["RUN_ONCE", "RUN_ALL", "SKIP"]),
    late=st.integers(0, 2 * 86400),
    window=st.one_of(st.none(), st.integers(1, 86400), st.sampled_from([1, 59, 60, 61, 599, 600, 601, 3600])),
    grace=st.sampled_from([0, 30, 60, 600]),
)
def test_the_catch_up_window_agrees_with_an_oracle(policy, late, window, grace):
    pending = T0 + timedelta(minutes=10)
    now = pending + timedelta(seconds=late)
    span = None if window is None else timedelta(seconds=window)
    result = windowed(policy, pending, now, span, timedelta(seconds=grace))
    runs, skipped = oracle(policy, pending, now, span, timedelta(seconds=grace))
    assert (result.runs, result.skipped) == (runs, skipped)
    assert (result.run_count, result.skip_count) == (len(runs), len(skipped))


@settings(max_examples=200, deadline=None, database=None)
@given(
    policy=st.sampled_from(["RUN_ONCE", "RUN_ALL", "SKIP"]),
    age=st.integers(0, 86400),
    window=st.integers(1, 86400),
)
def test_a_fire_within_the_window_is_never_skipped_for_it(policy, age, window):
    """`skip_reason` of one fire: the window skips exactly the fires more than it old (RUN_ONCE's
    claimed fire is kept when a later missed fire is within it), and names catchupWindowSec."""
    now = T0 + timedelta(days=2)
    fire = now - timedelta(seconds=age)
    reason = misfire.skip_reason(
        policy=policy,
        scheduled_for=fire,
        now=now,
        grace=timedelta(days=3),  # SKIP's own grace out of the way
        window=timedelta(seconds=window),
        next_fire=lambda after: cron.next_fire(EVERY_10, "UTC", after),
    )
    latest = cron.next_fire(EVERY_10, "UTC", now - timedelta(seconds=window, microseconds=1))
    kept = age <= window or (policy == "RUN_ONCE" and latest <= now)
    assert (reason == "") is kept
    if reason:
        assert f"catchupWindowSec {window}" in reason


def test_no_window_is_todays_behaviour():
    pending, now = T0, T0 + timedelta(hours=1, seconds=30)
    for policy in ("RUN_ONCE", "RUN_ALL", "SKIP"):
        assert windowed(policy, pending, now, None) == plan(policy, pending, now, limit=10**6)


def test_each_policy_after_an_hour_with_a_25_minute_window():
    pending, now = T0, T0 + timedelta(hours=1, seconds=30)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(7)]
    window = timedelta(minutes=25)
    assert windowed("RUN_ALL", pending, now, window).runs == fires[4:]  # 20, 10 and 0.5 min old
    assert windowed("RUN_ONCE", pending, now, window).runs == fires[:1]  # the catch-up run stands for them
    assert windowed("SKIP", pending, now, window).runs == []
    # A window shorter than the gap since the last missed fire: RUN_ONCE has nothing to catch up.
    assert windowed("RUN_ONCE", pending, now, timedelta(seconds=20)).runs == []
