"""Cron schedule evaluation for Tickwork: pure logic, no Django, no database.

Semantics (the contract other modules rely on):

* An expression has five fields: minute hour day-of-month month day-of-week.
  Ranges (``1-5``), steps (``*/15``, ``10-40/10``, ``5/15`` meaning ``5-59/15``),
  lists, month/day names (``JAN``, ``MON``), wrap-around ranges without a step
  (``22-2``, ``FRI-MON``) and ``weekday#n`` (n-th weekday of the month) are
  accepted. A whole day-of-month or day-of-week field of ``?`` means ``*``.
  Aliases: ``@hourly @daily @midnight @weekly @monthly @yearly @annually``.
  Rejected with :class:`CronError`: six/seven-field (seconds/year) expressions,
  ``@reboot``, ``L``, ``W`` and ``R`` (random) values.
* Spreading, as Jenkins' ``H``: a list item ``H`` is one value of its field
  chosen by hashing a seed (a job's id), ``H(a-b)`` one value in ``a..b``,
  ``H/n`` and ``H(a-b)/n`` every ``n`` from an offset chosen in ``[0, n)``. The
  day-of-month's bare ``H`` and ``H/n`` keep within 1-28 (so it fires every
  month) and the day-of-week's within 0-6, as Jenkins does; ``H/1`` is every
  value (Jenkins reads it as ``H``). Unlike Jenkins, each item's value is drawn
  independently (SHA-256 of seed, field and position), so one job's fields do
  not depend on one another. :func:`resolve` turns such an expression into the
  plain one it means for a seed; every other function takes ``seed=`` and
  evaluates that plain expression, so the rules below apply to it unchanged.
  Aliases keep their fixed meaning (``@hourly`` is ``0 * * * *``, not
  Jenkins' ``H * * * *``).
* Fields are evaluated in the job's IANA timezone; every returned time is an
  aware ``datetime`` in UTC (``tzinfo=datetime.timezone.utc``).
* Day-of-month and day-of-week follow the cron man page: if either field
  *begins with* ``*`` both must match, otherwise a day matching either runs.
  Day-of-week 0 and 7 are both Sunday.
* Daylight saving time follows Vixie cron:

  - If the minute or the hour field begins with ``*`` the schedule runs by
    ELAPSED time: a UTC instant fires iff its local wall time (with the fold it
    really has) matches. It fires in both occurrences of a repeated hour and
    never in a skipped hour (``0 * * * *`` runs 25 and 23 times on those days).
  - Otherwise the schedule is FIXED wall-clock: each matching local wall time
    fires once. A wall time skipped by spring-forward fires at the first instant
    after the gap; a wall time repeated by fall-back fires at its first
    occurrence only. Several wall times mapping to one instant fire once.

* A schedule with no calendar day that can match (``0 0 30 2 *``) is rejected
  by :func:`validate`; one that can never fire in a particular timezone (all of
  its days fall into DST gaps) makes :func:`next_fire` raise after searching
  :data:`SEARCH_YEARS` years.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import zoneinfo
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime, time, timedelta

from jobs.cron_parse import CronError, Schedule, first_of_next_month, schedule_for, template_of

__all__ = [
    "SEARCH_YEARS",
    "CronError",
    "fire_counts",
    "fires_after",
    "fires_between",
    "next_fire",
    "parse_timezone",
    "resolve",
    "validate",
]

# Long enough to cover the 28-year weekday/leap cycle plus the skipped leap
# day of 2100, so a rare-but-possible schedule (Feb 29 that is the 5th Monday)
# is still found rather than reported as "never fires".
SEARCH_YEARS = 50


# --------------------------------------------------------------------------- evaluation


@functools.lru_cache(maxsize=4096)
def _uniform_offset(tz: zoneinfo.ZoneInfo, day: date) -> timedelta | None:
    """The day's single UTC offset, or None if a transition touches the day.

    zoneinfo does not expose its transition table, so the day is probed at each
    hour and at 23:59 with both folds; a gap or repeat makes the folds
    disagree, and any net change makes the probes disagree.
    """
    base = datetime.combine(day, time())
    probes = [base + timedelta(hours=h) for h in range(24)] + [base + timedelta(hours=23, minutes=59)]
    offset = tz.utcoffset(base)
    for probe in probes:
        if tz.utcoffset(probe) != offset or tz.utcoffset(probe.replace(fold=1)) != offset:
            return None
    return offset


def _gap_end(tz: zoneinfo.ZoneInfo, wall: datetime, low: datetime, high: datetime) -> datetime:
    """First instant whose local wall time is >= ``wall`` (which lies in a gap).

    ``low`` is before the transition and ``high`` after it; transitions are
    whole seconds, so bisecting on seconds lands exactly on the transition.
    """
    while high - low > timedelta(seconds=1):
        mid = low + timedelta(seconds=int((high - low).total_seconds()) // 2)
        if mid.astimezone(tz).replace(tzinfo=None) >= wall:
            high = mid
        else:
            low = mid
    return high


def _regular_day_fires(schedule: Schedule, day: date, offset: timedelta, after: datetime) -> Iterator[datetime]:
    # With one offset all day, wall time order is instant order, so bisect to
    # the first wall time after `after` instead of converting every slot.
    threshold = after.replace(tzinfo=None) + offset
    base = datetime.combine(day, time(), tzinfo=UTC) - offset
    hours, minutes = schedule.hours, schedule.minutes
    hour_index = 0
    if threshold.date() > day:
        return
    if threshold.date() == day:
        hour_index = bisect_left(hours, threshold.hour)
        if hour_index < len(hours) and hours[hour_index] == threshold.hour:
            hour_start = base + timedelta(hours=threshold.hour)
            for minute in minutes[bisect_right(minutes, threshold.minute) :]:
                yield hour_start + timedelta(minutes=minute)
            hour_index += 1
    for hour in hours[hour_index:]:
        hour_start = base + timedelta(hours=hour)
        for minute in minutes:
            yield hour_start + timedelta(minutes=minute)


def _transition_day_fires(
    schedule: Schedule, tz: zoneinfo.ZoneInfo, day: date, after: datetime, hours: Iterable[int] | None = None
) -> list[datetime]:
    fires: set[datetime] = set()
    for hour, minute in itertools.product(schedule.hours if hours is None else hours, schedule.minutes):
        wall = datetime.combine(day, time(hour, minute))
        first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
        if first == second:
            fires.add(first)
        elif first.astimezone(tz).replace(tzinfo=None) == wall:  # repeated wall time
            fires.add(first)
            if schedule.elapsed:
                fires.add(second)
        elif not schedule.elapsed:  # skipped wall time
            fires.add(_gap_end(tz, wall, min(first, second), max(first, second)))
    return sorted(f for f in fires if f > after)


def _iter_fires(
    schedule: Schedule, tz: zoneinfo.ZoneInfo, after: datetime, until: datetime | None = None
) -> Iterator[datetime]:
    """Fires strictly after ``after`` in order; stops after ``until`` if given.

    Without ``until`` it raises CronError once SEARCH_YEARS pass without a fire.
    """
    after = after.astimezone(UTC)
    try:
        # A day's fires never precede the previous day's, except that a
        # gap/fold straddling midnight can move them across the date line, so
        # starting one day early is enough.
        day = after.astimezone(tz).date() - timedelta(days=1)
        last_day = None if until is None else until.astimezone(tz).date() + timedelta(days=2)
        horizon = _years_after(day)
        last: datetime | None = None
        while last_day is None or day <= last_day:
            if last_day is None and day > horizon:
                raise CronError(
                    f"cron expression {schedule.expression!r} never fires in timezone {tz.key!r} "
                    f"(no fire within {SEARCH_YEARS} years)"
                )
            if day.month not in schedule.months:
                day = first_of_next_month(day)
                continue
            if schedule.matches_day(day):
                offset = _uniform_offset(tz, day)
                fires: Iterator[datetime] | list[datetime]
                if offset is not None:
                    fires = _regular_day_fires(schedule, day, offset, after)
                else:
                    fires = _transition_day_fires(schedule, tz, day, after)
                for fire in fires:
                    if last is not None and fire <= last:
                        continue  # several skipped wall times land on one instant
                    if until is not None and fire > until:
                        return
                    last = fire
                    horizon = _years_after(day)
                    yield fire
            day += timedelta(days=1)
    except OverflowError:
        return  # ran off the end of datetime's range (year 9999)


def _years_after(day: date) -> date:
    try:
        return day + timedelta(days=366 * SEARCH_YEARS)
    except OverflowError:
        return date.max


def _aware_utc(value: datetime, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
    return value.astimezone(UTC)


_MICROSECOND = timedelta(microseconds=1)
_MINUTE_US = 60_000_000
_HOUR_US = 60 * _MINUTE_US
_DAY_US = 24 * _HOUR_US


def _hour_offset(tz: zoneinfo.ZoneInfo, day: date, hour: int) -> timedelta | None:
    """The single UTC offset of the wall hour ``hour:00``-``hour:59`` of ``day``, or None when a
    transition touches it (a gap or a repeat makes the folds disagree at one end)."""
    first = datetime.combine(day, time(hour))
    offset = tz.utcoffset(first)
    for probe in (first, first.replace(minute=59)):
        if tz.utcoffset(probe) != offset or tz.utcoffset(probe.replace(fold=1)) != offset:
            return None
    return offset


@dataclasses.dataclass
class _Tally:
    """Counts per interval, in microseconds from the first interval's start."""

    minutes: tuple[int, ...]
    counts: list[int]
    span: int
    end: int

    def hour(self, *, hour_start: int, after: int) -> int:
        """Count the fires of an hour whose minute 0 is at ``hour_start`` (those after
        ``after``); return the hour's last fire."""
        minutes = self.minutes
        last = hour_start + minutes[-1] * _MINUTE_US
        lowest = max(hour_start + minutes[0] * _MINUTE_US, after + 1, 0)
        if last < lowest or lowest >= self.end:
            return last
        # The first minute after `after`: m * MINUTE > after - hour_start.
        after_minute = (after - hour_start) // _MINUTE_US + 1
        index = lowest // self.span
        while index < len(self.counts) and index * self.span <= last:
            low = max(_ceil_div(index * self.span - hour_start, _MINUTE_US), after_minute)
            high = _ceil_div((index + 1) * self.span - hour_start, _MINUTE_US)
            if high > low:
                self.counts[index] += bisect_left(minutes, high) - bisect_left(minutes, low)
            index += 1
        return last

    def one(self, at: int) -> None:
        if 0 <= at < self.end:
            self.counts[at // self.span] += 1


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _count_day(
    schedule: Schedule, tz: zoneinfo.ZoneInfo, day: date, origin: datetime, after: int, tally: _Tally
) -> int:
    """Count the day's fires after ``after`` (microseconds from ``origin``); return its last fire
    (``after`` when none counts). An hour with one offset throughout (every hour of a day without
    a transition) is counted; the hours a transition touches are listed by _transition_day_fires."""
    offset = _uniform_offset(tz, day)
    latest = after
    if offset is not None:
        # One offset all day: its fires lie in the 24 hours from its midnight, and each hour's
        # start is a sum. A day wholly before `after` or past the intervals counts nothing.
        base = (datetime.combine(day, time(), tzinfo=UTC) - offset - origin) // _MICROSECOND
        if base + _DAY_US <= after + 1 or base >= tally.end:
            return after
        for hour in schedule.hours:
            latest = max(latest, tally.hour(hour_start=base + hour * _HOUR_US, after=after))
        return latest
    clean = {hour: o for hour in schedule.hours if (o := _hour_offset(tz, day, hour)) is not None}
    for hour, hour_offset in clean.items():
        hour_start = datetime.combine(day, time(hour), tzinfo=UTC) - hour_offset
        latest = max(latest, tally.hour(hour_start=(hour_start - origin) // _MICROSECOND, after=after))
    listed = [hour for hour in schedule.hours if hour not in clean]
    for fire in _transition_day_fires(schedule, tz, day, origin + after * _MICROSECOND, hours=listed):
        # A skipped wall time fires where the gap ends: maybe a time one of the counted hours has.
        wall = fire.astimezone(tz)
        if wall.date() == day and wall.hour in clean and wall.minute in schedule.minutes and not wall.second:
            continue
        at = (fire - origin) // _MICROSECOND
        tally.one(at)
        latest = max(latest, at)
    return latest


# --------------------------------------------------------------------------- public API


@functools.lru_cache(maxsize=512)
def parse_timezone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone called ``name``; CronError if there is none."""
    if not isinstance(name, str) or not name:
        raise CronError(f"unknown timezone {name!r}")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise CronError(f"unknown timezone {name!r}") from exc


def validate(expression: str) -> None:
    """Raise CronError naming the problem if ``expression`` is not a usable schedule. Hashed
    items need no seed: their ranges are checked, and so is that every resolution can fire."""
    template_of(expression)


def resolve(expression: str, seed: str) -> str:
    """``expression`` with each hashed item (``H``, ``H(a-b)``, ``H/n``, ``H(a-b)/n``) replaced
    by the plain values it stands for with ``seed`` (a job's id): a plain cron expression, the
    same for the same seed in every process. An expression without one is returned unchanged."""
    if template_of(expression).plain is not None:
        return expression
    return schedule_for(expression, seed).expression


def next_fire(expression: str, timezone: str, after: datetime, *, seed: str | None = None) -> datetime:
    """The first fire strictly after ``after``, as an aware UTC datetime. ``seed`` resolves
    hashed items (see :func:`resolve`); an expression with one and no seed is a CronError."""
    schedule, tz = schedule_for(expression, seed), parse_timezone(timezone)
    after_utc = _aware_utc(after, "after")
    for fire in _iter_fires(schedule, tz, after_utc):
        return fire
    raise CronError(f"cron expression {expression!r} has no fire after {after_utc.isoformat()}")


def fires_after(
    expression: str, timezone: str, after: datetime, count: int, *, seed: str | None = None
) -> list[datetime]:
    """The first ``count`` fires strictly after ``after``, in order, as aware UTC datetimes."""
    if count < 0:
        raise ValueError("count must not be negative")
    schedule, tz = schedule_for(expression, seed), parse_timezone(timezone)
    after_utc = _aware_utc(after, "after")
    if count == 0:
        return []
    fires = list(itertools.islice(_iter_fires(schedule, tz, after_utc), count))
    if len(fires) < count:
        raise CronError(f"cron expression {expression!r} has only {len(fires)} fires after {after_utc.isoformat()}")
    return fires


def fires_between(
    expression: str, timezone: str, start: datetime, end: datetime, limit: int = 10000, *, seed: str | None = None
) -> list[datetime]:
    """Fires in ``(start, end]`` in order, at most ``limit`` of them, as aware UTC datetimes."""
    if limit < 0:
        raise ValueError("limit must not be negative")
    schedule, tz = schedule_for(expression, seed), parse_timezone(timezone)
    start_utc, end_utc = _aware_utc(start, "start"), _aware_utc(end, "end")
    if end_utc <= start_utc:
        return []
    return list(itertools.islice(_iter_fires(schedule, tz, start_utc, until=end_utc), limit))


def fire_counts(
    expression: str,
    timezone: str,
    start: datetime,
    step: timedelta,
    count: int,
    *,
    after: datetime | None = None,
    seed: str | None = None,
) -> list[int]:
    """How many fires fall in each of ``count`` consecutive intervals of ``step`` from ``start``
    (``[start + i*step, start + (i+1)*step)``), counting only fires strictly after ``after`` when
    given: the fires :func:`fires_between` lists, counted without listing them, so a day of an
    every-minute schedule costs about what an hourly one does. An hour of a regular day is
    counted by bisecting its minutes between the intervals' bounds; only the hours a DST
    transition touches are listed, and with the rules above."""
    if count < 0:
        raise ValueError("count must not be negative")
    if step <= timedelta(0):
        raise ValueError("step must be positive")
    schedule, tz = schedule_for(expression, seed), parse_timezone(timezone)
    origin = _aware_utc(start, "start")
    counts = [0] * count
    # Times from here on are whole microseconds from `origin`, and the bounds are ints: the
    # arithmetic per hour is a few integer operations, not datetimes.
    span, end = step // _MICROSECOND, count * (step // _MICROSECOND)
    floor = -1 if after is None else max(-1, (_aware_utc(after, "after") - origin) // _MICROSECOND)
    tally = _Tally(schedule.minutes, counts, span, end)
    day = (origin + floor * _MICROSECOND).astimezone(tz).date() - timedelta(days=1)
    last_day = (origin + end * _MICROSECOND).astimezone(tz).date() + timedelta(days=2)
    while day <= last_day and count:
        if schedule.matches_day(day):
            # As in _iter_fires, a fire no later than one counted on an earlier day is not counted.
            floor = _count_day(schedule, tz, day, origin, floor, tally)
        day += timedelta(days=1)
    return counts
