"""The next 24 hours of fires across jobs, in 15-minute buckets, beside the pools' capacity: so an
operator sees a midnight herd (a thousand jobs on `0 0 * * *`) before it arrives.

Where the fires come from: an active CRON job's schedule (jobs/cron.py, in its timezone, its `H`
values resolved with its id as the dispatcher resolves them), from its pending fire on; an active
INTERVAL job's grid (jobs/recurrence.py: arithmetic, per job); a one-off or delayed job's
first attempt still waiting (its job's `next_fire_at` stays as its run ends:
executions/standing.py). Two jobs whose resolved schedule and timezone are the same fire
at the same instants, so each distinct (schedule, timezone) is counted once per bucket and its
count added once per job: a herd of a thousand identical schedules costs one count.

A schedule's fires are counted per bucket, not listed (cron.fire_counts): an every-minute job
costs about what an hourly one does, so every schedule counted is counted in full, to the end of
the 24 hours. A fire already due and not yet dispatched counts in the first bucket; the fires a
lagging dispatcher missed before that are the misfire policy's to run or skip, and are not
counted. Whom a fire loads: a plain job's pool; a workflow job's fire starts each of its steps in
the step's pool, so it counts once per step in that pool.

What bounds the work (a page stays well under 300 ms): at most MAX_JOBS jobs are read (the nearest
first) and at most MAX_SCHEDULES distinct schedules are counted. A schedule beyond those counts
only its pending fire; the page then says its counts are lower bounds.
"""

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Min

from executions.models import Execution
from executions.states import ExecutionState
from jobs import cron
from jobs.models import ONE_OFF_TYPES, Job, JobType
from jobs.recurrence import Interval
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
JOBS_LISTED = 25  # per bucket, when it is opened


@dataclass
class JobFires:
    """One job's fires in one bucket."""

    job_id: str
    name: str
    pools: list[str]  # a workflow's steps' pools, each once
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
    jobs = Job.objects.filter(state=JobState.ACTIVE, next_fire_at__isnull=False, next_fire_at__lt=end).exclude(
        type__in=ONE_OFF_TYPES
    )
    waiting = Execution.objects.filter(
        state=ExecutionState.PENDING,
        attempt=1,
        available_at__lt=end,
        job__state=JobState.ACTIVE,
        job__type__in=ONE_OFF_TYPES,
    )
    if scope is not None:
        jobs = jobs.filter(tenant_id__in=scope)
        waiting = waiting.filter(tenant_id__in=scope)
    rows: list[tuple[Any, ...]] = list(
        jobs.order_by("next_fire_at").values_list(
            "id", "name", "type", "schedule", "timezone", "pool", "next_fire_at", "workflow", "every_sec", "start_at"
        )[: MAX_JOBS + 1]
    )
    # A workflow one-off's root steps wait together: one fire of the job, at its earliest.
    job_columns = ("job__name", "job__type", "job__schedule", "job__timezone", "job__pool")
    later_columns = ("job__workflow", "job__every_sec", "job__start_at")
    rows += list(
        waiting.order_by()
        .values("job_id", *job_columns, *later_columns)
        .annotate(fire=Min("available_at"))
        .order_by("fire")
        .values_list("job_id", *job_columns, "fire", *later_columns)[: MAX_JOBS + 1]
    )
    rows.sort(key=lambda row: row[6])
    jobs_capped = len(rows) > MAX_JOBS
    rows = rows[:MAX_JOBS]

    # Each job's fires per bucket, shared by the jobs of one (resolved schedule, timezone).
    groups: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    counted: list[tuple[list[tuple], list[int]]] = []  # (the jobs, their fires in each bucket)
    for row in rows:
        job_id, _, job_type, schedule, zone, _, next_fire, _, every_sec, start_at = row
        if job_type == JobType.INTERVAL:
            # Arithmetic per job: nothing to share between intervals.
            interval = Interval(every=timedelta(seconds=every_sec), start=start_at)
            later = interval.fire_counts(start, BUCKET, BUCKETS, after=next_fire)
            per_bucket = [pending + fires for pending, fires in zip(_pending(next_fire, start), later, strict=True)]
            counted.append(([row], per_bucket))
            continue
        if job_type == JobType.CRON:
            try:
                groups[(cron.resolve(schedule, str(job_id)), zone)].append(row)
                continue
            except cron.CronError:
                pass  # not expandable: counted by its pending fire
        counted.append(([row], _pending(next_fire, start)))
    truncated = jobs_capped
    for number, ((schedule, zone), members) in enumerate(groups.items()):  # nearest first, as the rows came
        pending = min(m[6] for m in members)
        per_bucket = _pending(pending, start)
        if number >= MAX_SCHEDULES:
            truncated = True
        else:
            try:
                later = cron.fire_counts(schedule, zone, start, BUCKET, BUCKETS, after=pending)
                per_bucket = [pending_fire + fires for pending_fire, fires in zip(per_bucket, later, strict=True)]
            except (cron.CronError, OverflowError, ValueError):
                pass  # its pending fire is all there is to count
        counted.append((members, per_bucket))
    return _bucketed(counted, start=start, truncated=truncated, jobs=len(rows), jobs_capped=jobs_capped, now=now)


def _pending(fire: datetime, start: datetime) -> list[int]:
    """A job's pending fire in its bucket; one already due (not yet dispatched) in the first."""
    per_bucket = [0] * BUCKETS
    index = max(0, math.floor((fire - start) / BUCKET))
    if index < BUCKETS:
        per_bucket[index] = 1
    return per_bucket


def _pools_of(row: tuple) -> list[str]:
    """The pool of each execution a fire of the job starts: a workflow's steps' pools, in order."""
    workflow = row[7]
    if workflow:
        return [step["target"]["pool"] for step in workflow.get("steps", [])]
    return [row[5]]


def _bucketed(counted, *, start: datetime, truncated: bool, jobs: int, jobs_capped: bool, now) -> Upcoming:
    """Counts per bucket and pool, and the first JOBS_LISTED jobs of each bucket by name. The
    work is per (group, bucket), not per (job, fire): a herd of a thousand jobs on one schedule
    is added up once per bucket it fires in."""
    buckets = [Bucket(index=i, start=start + i * BUCKET) for i in range(BUCKETS)]
    pool_fires: dict[str, int] = defaultdict(int)
    for members, per_bucket in counted:
        starts = [_pools_of(member) for member in members]
        pools = Counter(pool for pools_of_member in starts for pool in pools_of_member)
        listed = [dict.fromkeys(pools_of_member) for pools_of_member in starts[:JOBS_LISTED]]
        for index, times in enumerate(per_bucket):
            if not times:
                continue
            bucket = buckets[index]
            bucket.count += times * len(members)
            bucket.jobs_total += len(members)
            for pool, count in pools.items():
                bucket.per_pool[pool] = bucket.per_pool.get(pool, 0) + times * count
                pool_fires[pool] += times * count
            for member, its_pools in zip(members[: JOBS_LISTED - len(bucket.jobs)], listed, strict=False):
                bucket.jobs.append(JobFires(job_id=str(member[0]), name=member[1], pools=list(its_pools), count=times))
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
