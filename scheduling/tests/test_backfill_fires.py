"""A backfill's fires (scheduling.backfills.backfill_fires) against an independent oracle: a
minute-by-minute walk of the cron expression through the range in the job's timezone, by the
rules docs/architecture.md ("Cron semantics") states, not by jobs/cron.py's arithmetic. `H` is
resolved by its definition (jobs.cron.resolve, the job's id as the seed), then walked the same."""

import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import cron
from jobs.models import Job
from scheduling.backfills import backfill_fires

MINUTE = timedelta(minutes=1)
# Days around the DST changes of 2026, and plain days, in each zone.
DAYS = {
    "Europe/Paris": [
        datetime(2026, 3, 28, tzinfo=UTC),
        datetime(2026, 10, 24, tzinfo=UTC),
        datetime(2026, 6, 1, tzinfo=UTC),
    ],
    "America/New_York": [
        datetime(2026, 3, 7, tzinfo=UTC),
        datetime(2026, 10, 31, tzinfo=UTC),
        datetime(2026, 1, 10, tzinfo=UTC),
    ],
    "UTC": [datetime(2026, 2, 27, tzinfo=UTC)],
}
MINUTES = ["*", "*/15", "0", "30", "0,30", "5-7", "H", "H/20"]
HOURS = ["*", "*/2", "2", "1-3", "0", "H", "H(1-3)", "2,14"]
DOMS = ["*", "1", "1-15", "*/2", "29"]
DOWS = ["*", "0", "1-5", "6"]


def _values(field: str, low: int, high: int) -> set[int]:
    found: set[int] = set()
    for item in field.split(","):
        part, _, step = item.partition("/")
        if part == "*":
            first, last = low, high
        elif "-" in part:
            first, last = (int(x) for x in part.split("-"))
        else:
            first = last = int(part)
            if step:
                last = high
        found |= set(range(first, last + 1, int(step or 1)))
    return {7 % 7 if v == 7 and high == 6 else v for v in found}


def _matches(fields: list[str], wall: datetime) -> bool:
    minute, hour, dom, month, dow = fields
    if wall.minute not in _values(minute, 0, 59) or wall.hour not in _values(hour, 0, 23):
        return False
    if wall.month not in _values(month, 1, 12):
        return False
    day_ok = wall.day in _values(dom, 1, 31)
    weekday_ok = (wall.isoweekday() % 7) in _values(dow, 0, 6)
    if not dom.startswith("*") and not dow.startswith("*"):  # both restricted: either (man 5 crontab)
        return day_ok or weekday_ok
    return day_ok and weekday_ok


def oracle(expression: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """Walk each UTC minute of [start, end) (both on whole minutes)."""
    fields = expression.split()
    tz = ZoneInfo(zone)
    elapsed = fields[0].startswith("*") or fields[1].startswith("*")
    fires = []
    t = start
    while t < end:
        wall = t.astimezone(tz)
        naive = wall.replace(tzinfo=None)
        before = (t - MINUTE).astimezone(tz).replace(tzinfo=None)
        if elapsed:
            fire = _matches(fields, naive)
        else:
            # A wall time repeated by fall-back fires at its first occurrence only: skip the
            # second (a local minute already seen an hour ago).
            repeated = wall.fold == 1  # the second pass of a wall time fall-back repeats
            fire = _matches(fields, naive) and not repeated
            # A wall time skipped by spring-forward fires at the first instant after the gap.
            skipped = before + MINUTE
            while not fire and skipped < naive:
                fire = _matches(fields, skipped)
                skipped += MINUTE
        if fire:
            fires.append(t)
        t += MINUTE
    return fires


def _job(expression: str, zone: str) -> Job:
    return Job(id=uuid.uuid4(), type="CRON", schedule=expression, timezone=zone)


@st.composite
def cases(draw):
    zone = draw(st.sampled_from(sorted(DAYS)))
    day = draw(st.sampled_from(DAYS[zone]))
    start = day + timedelta(minutes=draw(st.integers(0, 36 * 60)))
    end = start + timedelta(minutes=draw(st.integers(1, 36 * 60)))
    fields = [draw(st.sampled_from(options)) for options in (MINUTES, HOURS, DOMS)]
    expression = " ".join([*fields, "*", draw(st.sampled_from(DOWS))])
    return zone, start, end, expression


@settings(max_examples=150, deadline=None, database=None)
@given(cases())
def test_the_fires_are_the_walks_of_the_schedule_in_its_timezone(case):
    """Every fire of [start, end) and no other, DST days and H included."""
    zone, start, end, expression = case
    job = _job(expression, zone)
    expected = oracle(cron.resolve(expression, str(job.pk)), zone, start, end)
    assert backfill_fires(job=job, start=start, end=end) == expected


@settings(max_examples=60, deadline=None, database=None)
@given(cases(), st.integers(-1, 1))
def test_the_range_holds_its_start_and_not_its_end(case, nudge):
    """[from, to): a fire at `from` is in, a fire at `to` is out, to the microsecond."""
    zone, start, end, expression = case
    job = _job(expression, zone)
    fires = oracle(cron.resolve(expression, str(job.pk)), zone, start - timedelta(hours=2), end + timedelta(hours=2))
    if not fires:
        return
    edge = fires[len(fires) // 2]
    low, high = edge + nudge * timedelta(microseconds=1), edge + timedelta(hours=1)
    got = backfill_fires(job=job, start=low, end=high)
    assert (edge in got) == (nudge <= 0)
    got = backfill_fires(job=job, start=edge - timedelta(hours=1), end=low)
    assert (edge in got) == (nudge > 0)


def test_the_paris_hourly_days_of_dst_have_23_and_25_fires():
    job = _job("0 * * * *", "Europe/Paris")
    spring = datetime(2026, 3, 28, 23, tzinfo=UTC)  # Paris midnight, 29 March
    autumn = datetime(2026, 10, 24, 22, tzinfo=UTC)  # Paris midnight, 25 October
    assert len(backfill_fires(job=job, start=spring, end=spring + timedelta(hours=23))) == 23
    assert len(backfill_fires(job=job, start=autumn, end=autumn + timedelta(hours=25))) == 25


def test_a_fixed_time_in_new_yorks_gap_fires_once_after_it():
    """02:30 does not exist on 8 March 2026 in New York: it fires at 03:00 EDT (07:00Z)."""
    job = _job("30 2 * * *", "America/New_York")
    got = backfill_fires(job=job, start=datetime(2026, 3, 7, tzinfo=UTC), end=datetime(2026, 3, 10, tzinfo=UTC))
    assert got == [
        datetime(2026, 3, 7, 7, 30, tzinfo=UTC),
        datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
        datetime(2026, 3, 9, 6, 30, tzinfo=UTC),
    ]


def test_an_interval_jobs_fires_are_its_anchored_ones():
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    job = Job(id=uuid.uuid4(), type="INTERVAL", every_sec=600, start_at=anchor)
    got = backfill_fires(job=job, start=anchor + timedelta(minutes=5), end=anchor + timedelta(minutes=40))
    assert got == [anchor + timedelta(minutes=m) for m in (10, 20, 30)]
