"""Tests for Jenkins-style spreading (``H``) in jobs.cron: resolution is stable across processes,
uniform over many seeds, within its ranges, and the resolved schedule follows the DST rules of any
plain one. Pure tests: no Django, no database."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import cron, cron_parse
from jobs.cron import CronError

BERLIN = "Europe/Berlin"
FIELD_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
BARE_RANGES = [(0, 59), (0, 23), (1, 28), (1, 12), (0, 6)]  # bare H: day-of-month 1-28, weekday 0-6


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def ids(count: int) -> list[str]:
    """Job ids as the API makes them (UUIDs), but the same in every run."""
    return [str(uuid.uuid5(uuid.NAMESPACE_URL, f"tickwork-job-{i}")) for i in range(count)]


def field_values(resolved: str, index: int) -> set[int]:
    """The values one field of a plain expression stands for, as the engine reads them."""
    columns = ["*"] * 5
    columns[index] = resolved.split()[index]
    schedule = cron_parse.template_of(" ".join(columns)).plain
    assert schedule is not None
    sets = [set(schedule.minutes), set(schedule.hours), schedule.days_of_month, schedule.months]
    return set(sets[index]) if index < 4 else set(schedule.days_of_week)


# ---------------------------------------------------------------------------- stability


# Fixed values: a change of hash (or of how items are numbered) moves every job's times, so it
# must be a deliberate one that updates these.
KNOWN = [
    ("00000000-0000-0000-0000-000000000001", "H H * * *", "46 12 * * *"),
    ("00000000-0000-0000-0000-000000000001", "H(0-29)/10 H(9-17) H * H", "6-29/10 15 5 * 4"),
    ("00000000-0000-0000-0000-000000000001", "H/15 H/6 H/7 * *", "1-59/15 0-23/6 5-28/7 * *"),
    ("3f2b8c1e-7d4a-4e0b-9a51-2c6d8e9f0a1b", "H H * * *", "6 8 * * *"),
    ("3f2b8c1e-7d4a-4e0b-9a51-2c6d8e9f0a1b", "H(0-29)/10 H(9-17) H * H", "6-29/10 14 8 * 2"),
]


@pytest.mark.parametrize(("seed", "expression", "expected"), KNOWN)
def test_known_ids_resolve_to_fixed_values(seed: str, expression: str, expected: str) -> None:
    assert cron.resolve(expression, seed) == expected


def test_resolution_is_the_same_in_another_process_with_another_hash_salt() -> None:
    """Python's str hash is salted per process; the resolution must not be."""
    root = Path(__file__).resolve().parents[2]
    script = (
        "from jobs import cron; import json, sys; "
        "print(json.dumps([cron.resolve(e, s) for s, e, _ in json.loads(sys.argv[1])]))"
    )
    for salt in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(KNOWN)],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": salt, "PYTHONPATH": str(root)},
        )
        assert json.loads(out.stdout) == [expected for _, _, expected in KNOWN]


@settings(max_examples=200, deadline=None, database=None)
@given(seed=st.text(min_size=1, max_size=40), expression=st.sampled_from([k[1] for k in KNOWN]))
def test_same_seed_same_result_and_a_plain_expression(seed: str, expression: str) -> None:
    resolved = cron.resolve(expression, seed)
    assert resolved == cron.resolve(expression, seed)
    assert "h" not in resolved.lower()
    cron.validate(resolved)  # a plain expression, evaluated without a seed
    after = utc(2026, 6, 1)
    assert cron.next_fire(expression, "UTC", after, seed=seed) == cron.next_fire(resolved, "UTC", after)


def test_expression_without_h_is_returned_unchanged_and_ignores_the_seed() -> None:
    for expression in ("0 9 * * MON-FRI", "@daily", " */5 * * * * ", "30 2 ? * *"):
        assert cron.resolve(expression, "anything") == expression
        after = utc(2026, 1, 1)
        assert cron.next_fire(expression, "UTC", after, seed="x") == cron.next_fire(expression, "UTC", after)


def test_resolution_keeps_the_rest_of_the_expression_as_written() -> None:
    resolved = cron.resolve("h(0-4) 9-17/2 * JAN,Jul MON-FRI", "seed")
    assert re.fullmatch(r"[0-4] 9-17/2 \* JAN,Jul MON-FRI", resolved)


# ---------------------------------------------------------------------------- uniform


def chi_square(counts: Counter, values: range, total: int) -> float:
    expected = total / len(values)
    return sum((counts[v] - expected) ** 2 / expected for v in values)


def test_bare_h_minute_is_uniform_over_ten_thousand_ids() -> None:
    """10,000 jobs of `H * * * *` spread over the hour: every minute gets its share (expected
    166.7; 5 standard deviations either side) and the chi-square statistic (59 degrees of
    freedom, mean 59) is far from the 1-in-a-million tail (~112)."""
    seeds = ids(10_000)
    counts = Counter(int(cron.resolve("H * * * *", seed).split()[0]) for seed in seeds)
    assert set(counts) == set(range(60))
    assert all(100 <= counts[m] <= 235 for m in range(60)), counts
    assert chi_square(counts, range(60), len(seeds)) < 112


def test_fields_of_one_job_are_independent_and_each_uniform() -> None:
    """`H H H * H`: each field uniform over its range (day of month 1-28, weekday 0-6), and the
    minute says nothing about the hour (a job's fields are drawn independently)."""
    seeds = ids(10_000)
    rows = [tuple(int(v) for v in cron.resolve("H H H * H", seed).split()[:3]) for seed in seeds]
    weekdays = Counter(int(cron.resolve("H H H * H", seed).split()[4]) for seed in seeds[:2000])
    for index, (low, high) in enumerate(BARE_RANGES[:3]):
        counts = Counter(row[index] for row in rows)
        assert set(counts) == set(range(low, high + 1))
        values = range(low, high + 1)
        # p = 1e-6 tails for 59, 23 and 27 degrees of freedom.
        assert chi_square(counts, values, len(rows)) < {0: 112, 1: 62, 2: 69}[index]
    assert set(weekdays) == set(range(7))
    # Independence: the hours of jobs with an even minute are as uniform as all hours.
    even = Counter(hour for minute, hour, _ in rows if minute % 2 == 0)
    assert chi_square(even, range(24), sum(even.values())) < 62


def test_ten_thousand_midnight_jobs_spread_over_the_hour() -> None:
    """The issue's case: `H 0 * * *` for 10,000 jobs fires at 60 different minutes, not one."""
    after = utc(2026, 6, 1, 12)
    fires = {cron.next_fire("H 0 * * *", "UTC", after, seed=seed) for seed in ids(10_000)}
    assert {f.minute for f in fires} == set(range(60)) and {f.hour for f in fires} == {0}


# ---------------------------------------------------------------------------- ranges


@st.composite
def hashed_items(draw) -> tuple[int, str, int, int, int | None]:
    """(field index, item, low, high, step) for H(a-b), H(a-b)/n, H and H/n."""
    index = draw(st.integers(0, 4))
    if draw(st.booleans()):
        low, high = FIELD_RANGES[index]
        a = draw(st.integers(low, high))
        b = draw(st.integers(a, high))
        text = f"H({a}-{b})"
    else:
        a, b = BARE_RANGES[index]
        text = "H"
    step = draw(st.none() | st.integers(1, b - a + 1))
    return index, text + ("" if step is None else f"/{step}"), a, b, step


@settings(max_examples=300, deadline=None, database=None)
@given(item=hashed_items(), seed=st.text(min_size=1, max_size=20))
def test_hashed_values_stay_within_their_range_and_step(item, seed: str) -> None:
    index, text, low, high, step = item
    columns = ["0", "0", "*", "*", "*"]
    columns[index] = text
    if index == 2:
        columns[3] = "1"  # January has 31 days: any day of month may be chosen
    expression = " ".join(columns)
    cron.validate(expression)
    values = field_values(cron.resolve(expression, seed), index)
    norm = (lambda v: v % 7) if index == 4 else (lambda v: v)
    if step is None:
        assert len(values) == 1 and min(values) in {norm(v) for v in range(low, high + 1)}
    else:
        offsets = [norm(v) for v in range(low, low + step)]
        expected = [{norm(v) for v in range(low + offset, high + 1, step)} for offset in range(step)]
        assert values in expected, (expression, values, offsets)


def test_bare_day_of_month_h_stays_within_1_to_28_so_it_fires_every_month() -> None:
    days = {int(cron.resolve("0 0 H * *", seed).split()[2]) for seed in ids(3000)}
    assert days == set(range(1, 29))
    for seed in ids(50):
        fires = cron.fires_between("0 0 H * *", "UTC", utc(2027, 1, 1), utc(2028, 1, 1), seed=seed)
        assert len(fires) == 12  # February included


def test_h_slash_1_is_every_value() -> None:
    assert cron.resolve("H/1 0 * * *", "x") == "0-59/1 0 * * *"


# ---------------------------------------------------------------------------- DST


def seed_resolving_to(expression: str, wanted: str) -> str:
    for seed in ids(5000):
        if cron.resolve(expression, seed) == wanted:
            return seed
    raise AssertionError(f"no seed in 5,000 resolves {expression!r} to {wanted!r}")


def test_a_job_resolved_to_0230_in_berlin_behaves_as_any_0230_job() -> None:
    """Spring forward (2027-03-28, 02:00 → 03:00): the 02:30 fire comes at the end of the gap,
    03:00 CEST (01:00 UTC); fall back (2027-10-31, 03:00 → 02:00): 02:30 fires once, at its first
    occurrence (00:30 UTC)."""
    seed = seed_resolving_to("H H(2-2) * * *", "30 2 * * *")
    spring = cron.fires_between("H H(2-2) * * *", BERLIN, utc(2027, 3, 26), utc(2027, 3, 30), seed=seed)
    assert spring == cron.fires_between("30 2 * * *", BERLIN, utc(2027, 3, 26), utc(2027, 3, 30))
    assert utc(2027, 3, 28, 1) in spring
    fall = cron.fires_between("H H(2-2) * * *", BERLIN, utc(2027, 10, 30), utc(2027, 11, 1), seed=seed)
    assert fall == [utc(2027, 10, 30, 0, 30), utc(2027, 10, 31, 0, 30)]


def test_hashed_minute_of_an_every_hour_job_runs_by_elapsed_time() -> None:
    """`H * * * *` has an hour field of `*`: it runs by elapsed time, 25 fires on the fall-back
    day in Berlin and 23 on the spring-forward day, as `0 * * * *` does."""
    seed = ids(1)[0]
    minute = int(cron.resolve("H * * * *", seed).split()[0])
    for start, count in ((datetime(2027, 10, 31), 25), (datetime(2027, 3, 28), 23)):
        zone = cron.parse_timezone(BERLIN)
        begin = start.replace(tzinfo=zone).astimezone(UTC) - timedelta(seconds=1)
        end = (start + timedelta(days=1)).replace(tzinfo=zone).astimezone(UTC) - timedelta(seconds=1)
        fires = cron.fires_between("H * * * *", BERLIN, begin, end, seed=seed)
        assert len(fires) == count and {f.minute for f in fires} == {minute}


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("H(50-70) * * * *", r"minute field: 70 is out of range 0-59"),
        ("0 H(20-25) * * *", r"hour field: 25 is out of range 0-23"),
        ("0 0 H(0-5) * *", r"day-of-month field: 0 is out of range 1-31"),
        ("H(30-10) * * * *", r"minute field: 'H\(30-10\)': the range must run from low to high"),
        ("H/0 * * * *", r"minute field: step '0' is not a positive integer"),
        ("H/x * * * *", r"minute field: step 'x' is not a positive integer"),
        ("H/61 * * * *", r"minute field: 'H/61': step 61 is longer than the range 0-59"),
        ("0 0 H/29 * *", r"day-of-month field: 'H/29': step 29 is longer than the range 1-28"),
        ("H(0-9)/11 * * * *", r"step 11 is longer than the range 0-9"),
        ("H(1-2 * * * *", r"minute field: 'H\(1-2' is not a valid hashed value"),
        ("H5 * * * *", r"minute field: 'H5' is not a valid hashed value"),
        ("Hx * * * *", r"minute field: 'hx' is not a valid value"),
        ("5-H * * * *", r"minute field: .*'H' \(hashed\) stands alone"),
        ("0 0 * * H#2", r"day-of-week field: .*'H' \(hashed\) stands alone"),
        ("0 0 H(29-31) 2 *", r"never fires for some jobs \(resolved as '0 0 31 2 \*'\)"),
        ("0 0 H(30-31) H *", r"never fires for some jobs"),
    ],
)
def test_invalid_hashed_expressions(expression: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        cron.validate(expression)
    with pytest.raises(CronError, match=message):
        cron.next_fire(expression, "UTC", utc(2026, 1, 1), seed="job")


@pytest.mark.parametrize(
    "expression", ["H * * * *", "H(0-29) 0 * * *", "H/15 * * * *", "H(0-29)/10 * * * *", "0 0 H(1-31) 1 *"]
)
def test_validate_accepts_hashed_forms_without_a_seed(expression: str) -> None:
    cron.validate(expression)


def test_hashed_expression_without_a_seed_is_an_error_naming_the_seed() -> None:
    after = utc(2026, 1, 1)
    for call in (
        lambda: cron.next_fire("H H * * *", "UTC", after),
        lambda: cron.fires_after("H H * * *", "UTC", after, 3),
        lambda: cron.fires_between("H H * * *", "UTC", after, after + timedelta(days=2)),
    ):
        with pytest.raises(CronError, match=r"hashed \(H\) values, which need a seed"):
            call()
    with pytest.raises(CronError, match="seed must be a non-empty string"):
        cron.resolve("H H * * *", "")


def test_a_day_of_month_that_fits_every_month_is_accepted() -> None:
    """H(29-31) is fine in months that have those days; with February it is refused above."""
    cron.validate("0 0 H(29-31) 1,3 *")
    cron.validate("0 0 H(29-30) 2,3 *")  # February 29/30 never, but March always has them
