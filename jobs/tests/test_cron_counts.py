"""jobs.cron.fire_counts: the fires of fires_between counted per interval without listing them,
equal to listing them and counting, on regular days and across every kind of DST transition
(gaps, repeats, half-hour shifts, odd offsets, fixed and elapsed schedules). Pure: no database."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import cron
from jobs.tests.test_cron import TRANSITIONS

QUARTER = timedelta(minutes=15)
ZONES = ["UTC", "Asia/Kathmandu", "America/St_Johns", *sorted({t.zone for t in TRANSITIONS})]
SCHEDULES = [
    "* * * * *",
    "*/7 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0,30 1-3 * * *",
    "*/5 1,2 * * *",
    "15,45 * * * 1-5",
    "0 0 * * *",
    "59 23 * * *",
    "10-40/10 */3 * * *",
    "0 2 29 2 *",
    "* 2 * * *",
    "0,15,30,45 0-3 * * *",
]


def _listed(expression: str, zone: str, start: datetime, step: timedelta, count: int, after) -> list[int]:
    """The reference: every fire listed by fires_between, then counted into its interval."""
    end = start + step * count
    since = start - timedelta(microseconds=1) if after is None else max(after, start - timedelta(microseconds=1))
    counts = [0] * count
    for fire in cron.fires_between(expression, zone, since, end, limit=10**6):
        if start <= fire < end:
            counts[(fire - start) // step] += 1
    return counts


@pytest.mark.parametrize("transition", TRANSITIONS, ids=lambda t: f"{t.zone}-{t.local_date}")
@pytest.mark.parametrize("expression", SCHEDULES)
def test_counts_across_each_transition_equal_the_listed_fires(transition, expression):
    start = transition.instant - timedelta(hours=13, minutes=7)
    assert cron.fire_counts(expression, transition.zone, start, QUARTER, 97) == _listed(
        expression, transition.zone, start, QUARTER, 97, None
    )


@settings(max_examples=300, deadline=None)
@given(
    expression=st.sampled_from(SCHEDULES),
    zone=st.sampled_from(ZONES),
    start=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31)).map(
        lambda d: d.replace(tzinfo=UTC)
    ),
    step_minutes=st.sampled_from([1, 7, 15, 60, 90]),
    count=st.integers(min_value=0, max_value=120),
    after_minutes=st.one_of(st.none(), st.integers(min_value=-90, max_value=600)),
)
def test_counts_equal_the_listed_fires(expression, zone, start, step_minutes, count, after_minutes):
    after = None if after_minutes is None else start + timedelta(minutes=after_minutes, seconds=13)
    step = timedelta(minutes=step_minutes)
    assert cron.fire_counts(expression, zone, start, step, count, after=after) == _listed(
        expression, zone, start, step, count, after
    )


def test_a_day_of_an_every_minute_schedule_is_counted_not_listed():
    """97 quarter-hours from 21:00: 15 fires in each, 1,455 in all."""
    counts = cron.fire_counts("* * * * *", "Europe/Paris", datetime(2026, 11, 26, 21, tzinfo=UTC), QUARTER, 97)
    assert counts == [15] * 97


def test_hashed_items_are_resolved_with_the_seed():
    start = datetime(2026, 11, 26, tzinfo=UTC)
    plain = cron.resolve("H * * * *", "job-1")
    assert cron.fire_counts("H * * * *", "UTC", start, QUARTER, 96, seed="job-1") == cron.fire_counts(
        plain, "UTC", start, QUARTER, 96
    )


@pytest.mark.parametrize(("step", "count"), [(timedelta(0), 1), (QUARTER, -1)])
def test_a_bad_grid_is_refused(step, count):
    with pytest.raises(ValueError):
        cron.fire_counts("* * * * *", "UTC", datetime(2026, 1, 1, tzinfo=UTC), step, count)
