"""INTERVAL jobs' fires (jobs/recurrence.py `Interval`), against an oracle that walks the fires
one by one: anchored at the start (no drift), blind to DST, and the misfire policies applied to
them as to a cron job's (jobs.misfire). Pure: no database."""

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import misfire
from jobs.recurrence import Cron, Interval, first_fire

T0 = datetime(2027, 3, 28, 0, 30, tzinfo=UTC)  # Europe's spring-forward night, 01:00 UTC
GRACE = timedelta(seconds=60)

starts = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC))
periods = st.integers(min_value=1, max_value=10 * 86400).map(lambda s: timedelta(seconds=s))
offsets = st.integers(min_value=-5 * 86400, max_value=20 * 86400).map(
    lambda s: timedelta(seconds=s, microseconds=s % 7)
)


def oracle(start: datetime, every: timedelta, after: datetime, count: int) -> list[datetime]:
    """Walk from the start, one period at a time."""
    fire, found = start, []
    while len(found) < count:
        if fire > after:
            found.append(fire)
        fire += every
    return found


@settings(max_examples=300, deadline=None)
@given(start=starts, every=periods, offset=offsets, count=st.integers(0, 5))
def test_fires_are_the_start_plus_whole_periods(start, every, offset, count):
    interval = Interval(every=every, start=start)
    after = start + offset
    if offset > 200 * every:  # the oracle walks; keep it short
        return
    assert interval.fires_after(after, count) == oracle(start, every, after, count)
    if count:
        assert interval.next_fire(after) == oracle(start, every, after, 1)[0]


@settings(max_examples=200, deadline=None)
@given(start=starts, every=periods, a=offsets, b=offsets, limit=st.integers(0, 50))
def test_fires_between_is_fires_after_cut_at_the_end(start, every, a, b, limit):
    interval = Interval(every=every, start=start)
    low, high = sorted((start + a, start + b))
    expected = [f for f in interval.fires_after(low, limit + 1) if f <= high][:limit]
    assert interval.fires_between(low, high, limit) == expected


@settings(max_examples=200, deadline=None)
@given(start=starts, every=periods, origin=offsets, step=periods, count=st.integers(0, 30), after=offsets)
def test_fire_counts_count_the_listed_fires(start, every, origin, step, count, after):
    interval = Interval(every=every, start=start)
    begin, cut = start + origin, start + after
    if (step * count) / every > 2000:
        return
    listed = interval.fires_between(begin - timedelta(microseconds=1), begin + step * count, 100_000)
    expected = [0] * count
    for fire in listed:
        i = (fire - begin) // step
        if 0 <= i < count and fire > cut:
            expected[i] += 1
    assert interval.fire_counts(begin, step, count, after=cut) == expected


def test_the_run_s_length_never_shifts_the_fires():
    """Anchored: the fire after a run that ended late is still on the grid."""
    interval = Interval(every=timedelta(seconds=90), start=T0)
    ran_until = T0 + timedelta(seconds=90 * 3 + 75)  # the 4th fire's run took 75 s
    assert interval.next_fire(ran_until) == T0 + timedelta(seconds=90 * 4)


def test_dst_changes_nothing_where_a_wall_clock_cron_moves():
    """A daily interval started at 02:30 in Paris fires every 24 hours of elapsed time: at 03:30
    on the wall clock once summer time begins. The cron job "30 2 * * *" in Paris keeps to the
    wall clock instead (03:00 on the night 02:30 does not exist, then 02:30 again)."""
    daily = Interval(every=timedelta(days=1), start=datetime(2027, 3, 27, 1, 30, tzinfo=UTC))
    fires = daily.fires_after(datetime(2027, 3, 27, tzinfo=UTC), 3)
    assert all(b - a == timedelta(days=1) for a, b in itertools.pairwise(fires))
    paris = ZoneInfo("Europe/Paris")
    assert [f.astimezone(paris).strftime("%d %H:%M") for f in fires] == ["27 02:30", "28 03:30", "29 03:30"]
    wall = Cron("30 2 * * *", "Europe/Paris").fires_after(datetime(2027, 3, 27, tzinfo=UTC), 3)
    assert [f.astimezone(paris).strftime("%d %H:%M") for f in wall] == ["27 02:30", "28 03:00", "29 02:30"]


def test_the_first_fire_is_the_start_or_the_first_after_now():
    interval = Interval(every=timedelta(seconds=90), start=T0)
    assert first_fire(interval, now=T0, start=T0) == T0
    assert first_fire(interval, now=T0 - timedelta(hours=1), start=T0) == T0
    assert first_fire(interval, now=T0 + timedelta(seconds=100), start=T0) == T0 + timedelta(seconds=180)
    hourly = Cron("0 * * * *", "UTC")
    assert first_fire(hourly, now=T0, start=None) == datetime(2027, 3, 28, 1, tzinfo=UTC)
    assert first_fire(hourly, now=T0, start=datetime(2027, 3, 28, 5, tzinfo=UTC)) == datetime(
        2027, 3, 28, 5, tzinfo=UTC
    )


@settings(max_examples=200, deadline=None)
@given(
    every=st.integers(1, 3600).map(lambda s: timedelta(seconds=s)),
    late=st.integers(0, 6 * 3600).map(lambda s: timedelta(seconds=s)),
    policy=st.sampled_from(["RUN_ONCE", "RUN_ALL", "SKIP"]),
)
def test_misfire_policies_apply_to_an_interval_as_to_cron(every, late, policy):
    """A job whose pending fire is `late` behind now: RUN_ALL runs every missed fire, RUN_ONCE
    the pending one only, SKIP none that is more than the grace late; the next fire is after now."""
    interval = Interval(every=every, start=T0)
    now = T0 + late
    plan = misfire.catch_up(
        policy=policy,
        pending=T0,
        now=now,
        grace=GRACE,
        fires_between=lambda a, b, n: interval.fires_between(a, b, n),
        next_fire=interval.next_fire,
        count_limit=1_000_000,
        limit=1_000_000,
    )
    due = [T0, *interval.fires_between(T0, now, 1_000_000)]
    on_time = [fire for fire in due if fire >= now - GRACE]
    expected_runs = {"RUN_ALL": due, "RUN_ONCE": [T0], "SKIP": [T0] if T0 >= now - GRACE else []}[policy]
    assert plan.runs == expected_runs
    assert sorted(plan.runs + plan.skipped) == due
    assert plan.next_fire == interval.next_fire(now) > now
    if policy == "SKIP":
        assert set(plan.runs) <= set(on_time)
