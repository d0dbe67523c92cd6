"""The next 24 hours of fires across jobs, in 15-minute buckets, beside the pools' capacity: so an
operator sees a midnight herd (a thousand jobs on `0 0 * * *`) before it arrives.

Where the fires come from: an active CRON job's schedule (jobs/cron.py, in its timezone, its `H`
values resolved with its id as the dispatcher resolves them), from its pending fire on; a one-off
or delayed job's `next_fire_at`. Two jobs whose resolved schedule and timezone are the same fire
at the same instants, so each distinct (schedule, timezone) is expanded once and counted once per
job: a herd of a thousand identical schedules costs one expansion.

What bounds the work (a page stays well under 300 ms): at most MAX_JOBS jobs are read (the nearest
first), at most MAX_SCHEDULES distinct schedules are expanded, each to at most
MAX_FIRES_PER_SCHEDULE fires (one every 5 minutes), and at most MAX_FIRES fires in all. A schedule
beyond those bounds counts only its pending fire; the page then says its counts are lower bounds.
"""

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobs import cron
from jobs.models import Job, JobType
from jobs.states import JobState
from pools import registry
from pools.registry import Capacity

WINDOW = timedelta(hours=24)
BUCKET = timedelta(minutes=15)
# One more than the window holds: the first bucket starts up to a bucket before now, so the fires
# just under 24 hours ahead (tomorrow's midnight herd, seen from 00:05) fall in the last one.
BUCKETS = int(WINDOW / BUCKET) + 1
MAX_JOBS = 5000
MAX_SCHEDULES = 200
MAX_FIRES_PER_SCHEDULE = 288
MAX_FIRES = 20_000
JOBS_LISTED = 25  # per bucket, when it is opened


@dataclass
class JobFires:
    """One job's fires in one bucket."""

    job_id: str
    name: str
    pool: str
    count: int


@dataclass
class Bucket:
    index: int
    start: datetime
    count: int = 0
    jobs: list[JobFires] = field(default_factory=list)
    jobs_total: int = 0  # how many jobs fire in it (`jobs` names at most JOBS_LISTED of them)
    per_pool: dict[str, int] = field(default_factory=dict)

    @property
    def jobs_more(self) -> int:
        return self.jobs_total - len(self.jobs)


@dataclass
class PoolLoad:
    pool: str
    fires: int
    peak: int
    peak_at: datetime | None
    capacity: Capacity | None

    @property
    def over(self) -> bool:
        """More fires in one bucket than the pool has slots: they will queue."""
        return self.capacity is None or self.peak > self.capacity.slots


@dataclass
class Upcoming:
    start: datetime
    buckets: list[Bucket]
    pools: list[PoolLoad]
    total: int
    jobs: int
    truncated: bool  # some counts are lower bounds (a bound above was reached)
    jobs_capped: bool

    @property
    def peak(self) -> Bucket | None:
        busiest = max(self.buckets, key=lambda b: b.count, default=None)
        return busiest if busiest is not None and busiest.count else None


def upcoming_fires(*, scope: list[int] | None, now: datetime) -> Upcoming:
    start = now.replace(second=0, microsecond=0, minute=now.minute - now.minute % 15)
    end = start + BUCKETS * BUCKET
    jobs = Job.objects.filter(state=JobState.ACTIVE, next_fire_at__isnull=False, next_fire_at__lt=end)
    if scope is not None:
        jobs = jobs.filter(tenant_id__in=scope)
    rows: list[tuple[Any, ...]] = list(
        jobs.order_by("next_fire_at").values_list("id", "name", "type", "schedule", "timezone", "pool", "next_fire_at")[
            : MAX_JOBS + 1
        ]
    )
    jobs_capped = len(rows) > MAX_JOBS
    rows = rows[:MAX_JOBS]

    # Each job's fire times, shared by the jobs of one (resolved schedule, timezone).
    groups: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    single: list[tuple[tuple, list[datetime]]] = []  # (job row, its one fire)
    for row in rows:
        job_id, _, job_type, schedule, zone, _, next_fire = row
        if job_type == JobType.CRON:
            try:
                groups[(cron.resolve(schedule, str(job_id)), zone)].append(row)
                continue
            except cron.CronError:
                pass  # not expandable: counted by its pending fire
        single.append((row, [next_fire]))
    truncated, budget, expanded = jobs_capped, MAX_FIRES, 0
    timed: list[tuple[list[tuple], list[datetime]]] = [([row], fires) for row, fires in single]
    for (schedule, zone), members in groups.items():  # nearest first: rows came by next_fire_at
        pending = min(m[6] for m in members)
        limit = min(MAX_FIRES_PER_SCHEDULE, budget)
        if expanded >= MAX_SCHEDULES or limit <= 0:
            timed.append((members, [pending]))
            truncated = True
            continue
        try:
            fires = cron.fires_between(schedule, zone, pending, end, limit=limit)
        except (cron.CronError, OverflowError, ValueError):
            fires = []
        expanded += 1
        budget -= len(fires)
        truncated |= len(fires) == limit
        timed.append((members, [pending, *fires]))
    return _bucketed(timed, start=start, end=end, truncated=truncated, jobs=len(rows), jobs_capped=jobs_capped, now=now)


def _bucketed(timed, *, start: datetime, end: datetime, truncated: bool, jobs: int, jobs_capped: bool, now) -> Upcoming:
    """Counts per bucket and pool, and the first JOBS_LISTED jobs of each bucket by name. The
    work is per (group, bucket), not per (job, fire): a herd of a thousand jobs on one schedule
    is added up once per bucket it fires in."""
    buckets = [Bucket(index=i, start=start + i * BUCKET) for i in range(BUCKETS)]
    pool_fires: dict[str, int] = defaultdict(int)
    for members, fires in timed:
        # A fire already due (not yet dispatched) is counted in the first bucket.
        per_bucket = Counter(max(0, math.floor((fire - start) / BUCKET)) for fire in fires if fire < end)
        pools = Counter(member[5] for member in members)
        for index, times in per_bucket.items():
            bucket = buckets[index]
            bucket.count += times * len(members)
            bucket.jobs_total += len(members)
            for pool, count in pools.items():
                bucket.per_pool[pool] = bucket.per_pool.get(pool, 0) + times * count
                pool_fires[pool] += times * count
            for job_id, name, _, _, _, pool, _ in members[: JOBS_LISTED - len(bucket.jobs)]:
                bucket.jobs.append(JobFires(job_id=str(job_id), name=name, pool=pool, count=times))
    for bucket in buckets:
        bucket.jobs.sort(key=lambda j: (-j.count, j.name))
    capacity = registry.capacity(now)
    loads = []
    for pool in sorted(set(pool_fires) | set(capacity)):
        peak_bucket = max(buckets, key=lambda b: b.per_pool.get(pool, 0))
        peak = peak_bucket.per_pool.get(pool, 0)
        loads.append(
            PoolLoad(
                pool=pool,
                fires=pool_fires.get(pool, 0),
                peak=peak,
                peak_at=peak_bucket.start if peak else None,
                capacity=capacity.get(pool),
            )
        )
    return Upcoming(
        start=start,
        buckets=buckets,
        pools=loads,
        total=sum(b.count for b in buckets),
        jobs=jobs,
        truncated=truncated,
        jobs_capped=jobs_capped,
    )
