"""When a recurring job fires, whatever kind of schedule it has: a cron expression in a timezone
(jobs/cron.py) or a fixed interval (INTERVAL jobs). Pure: no database.

Everything that asks a job for its fires (the first one at creation, the next one after each
fire, the misfire catch-up and the resume's dry run, the schedule preview, the dashboard's
upcoming fires) asks its `Recurrence`, so a kind of schedule is added here and nowhere else.

An interval is anchored: it fires at `start + k * every` (k = 0, 1, 2, …), in UTC, so a run's
duration never shifts the fires after it (no drift), and DST changes nothing (a wall clock's
hour is not an interval's). `start` is the job's `startAt`, the creation time by default.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from jobs import cron
from jobs.models import Job, JobType

_MICROSECOND = timedelta(microseconds=1)


class Recurrence(Protocol):
    def next_fire(self, after: datetime) -> datetime:
        """The first fire strictly after `after` (aware UTC)."""

    def fires_after(self, after: datetime, count: int) -> list[datetime]:
        """The first `count` fires strictly after `after`, in order."""

    def fires_between(self, start: datetime, end: datetime, limit: int = 10000) -> list[datetime]:
        """The fires in (start, end], in order, at most `limit`."""

    def fire_counts(self, start: datetime, step: timedelta, count: int, *, after: datetime | None = None) -> list[int]:
        """How many fires fall in each of `count` intervals [start + i*step, start + (i+1)*step),
        counting only fires strictly after `after` when given."""


@dataclass(frozen=True)
class Cron:
    expression: str
    timezone: str
    seed: str | None = None  # the job's id, which resolves H

    def next_fire(self, after: datetime) -> datetime:
        return cron.next_fire(self.expression, self.timezone, after, seed=self.seed)

    def fires_after(self, after: datetime, count: int) -> list[datetime]:
        return cron.fires_after(self.expression, self.timezone, after, count, seed=self.seed)

    def fires_between(self, start: datetime, end: datetime, limit: int = 10000) -> list[datetime]:
        return cron.fires_between(self.expression, self.timezone, start, end, limit, seed=self.seed)

    def fire_counts(self, start: datetime, step: timedelta, count: int, *, after: datetime | None = None) -> list[int]:
        return cron.fire_counts(self.expression, self.timezone, start, step, count, after=after, seed=self.seed)


@dataclass(frozen=True)
class Interval:
    every: timedelta
    start: datetime  # aware; the first fire

    def __post_init__(self) -> None:
        if self.every <= timedelta(0):
            raise ValueError("an interval must be positive")
        if self.start.tzinfo is None:
            raise ValueError("an interval's start must be aware")

    def _index_after(self, after: datetime) -> int:
        """The k of the first fire strictly after `after`."""
        if after < self.start:
            return 0
        return (after - self.start) // self.every + 1

    def _at(self, k: int) -> datetime:
        return self.start + k * self.every

    def next_fire(self, after: datetime) -> datetime:
        return self._at(self._index_after(after))

    def fires_after(self, after: datetime, count: int) -> list[datetime]:
        if count < 0:
            raise ValueError("count must not be negative")
        first = self._index_after(after)
        return [self._at(first + i) for i in range(count)]

    def fires_between(self, start: datetime, end: datetime, limit: int = 10000) -> list[datetime]:
        if limit < 0:
            raise ValueError("limit must not be negative")
        if end <= start:
            return []
        first, last = self._index_after(start), self._index_after(end) - 1  # the last fire <= end
        return [self._at(k) for k in range(first, min(last, first + limit - 1) + 1)]

    def fire_counts(self, start: datetime, step: timedelta, count: int, *, after: datetime | None = None) -> list[int]:
        if count < 0:
            raise ValueError("count must not be negative")
        if step <= timedelta(0):
            raise ValueError("step must be positive")

        def before(moment: datetime) -> int:
            """How many fires are strictly before `moment` (and after `after`)."""
            n = 0 if moment <= self.start else (moment - self.start - _MICROSECOND) // self.every + 1
            if after is not None:
                n -= min(n, self._index_after(after))
            return n

        edges = [before(start + i * step) for i in range(count + 1)]
        return [edges[i + 1] - edges[i] for i in range(count)]


def first_fire(recurrence: Recurrence, *, now: datetime, start: datetime | None) -> datetime:
    """A new (or restored) job's first fire: its `start` itself when that is still ahead (an
    interval's fire k = 0; a cron job with a start fires first after it), else the first after now."""
    if start is not None and start >= now:
        return start if isinstance(recurrence, Interval) else recurrence.next_fire(start - _MICROSECOND)
    return recurrence.next_fire(now)


def of_job(job: Job) -> Recurrence | None:
    """The job's schedule, or None for a job that does not recur (ONCE, DELAYED, EVENT)."""
    if job.type == JobType.CRON:
        return Cron(job.schedule, job.timezone, seed=str(job.pk))
    if job.type == JobType.INTERVAL:
        assert job.every_sec is not None and job.start_at is not None  # the table's check says so
        return Interval(every=timedelta(seconds=job.every_sec), start=job.start_at)
    return None
