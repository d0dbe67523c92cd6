"""The pools' history, a minute at a time: the sweeper records, as each minute ends, one
PoolSample row per pool for every tenant together (every known pool, even a quiet one: a zero
is not a gap) and one per (pool, tenant) with anything to say: its queue then, what finished and
started in the minute, the start lag of those starts. Pruned after HISTORY. The dashboard's
charts read them for ranges of hours and days, when the executions of those days (hundreds of
thousands) would be too many to read per page: staff read the totals, a member its tenants' rows.

A minute is recorded once, after it ended (by the database's clock), by whichever sweeper gets
to it: the unique constraints make a second sweeper's rows no-ops. A minute in which no sweeper
ran stays unrecorded: the charts show a gap, not a guess.

Reads are bounded: the queue's counts walk the partial indexes of live work (due, QUEUED,
RUNNING), what finished in the minute a range of the finished_at index."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Q

from executions.backlog import due_work
from executions.models import Execution
from executions.start_lag import start_lag_seconds
from executions.states import ExecutionState
from executions.store import store
from executions.tallies import percentile
from jobs import registry as job_registry
from pools.models import PoolSample

S = ExecutionState
HISTORY = timedelta(days=8)
MINUTE = timedelta(minutes=1)
_recorded: dict[str, datetime] = {}  # this process's last recorded minute: it is not asked again


def minute_of(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def record(*, now: datetime) -> int:
    """Record the minute that ended last before `now`, unless it is recorded. Returns the rows
    written (0 for a quiet minute, or one already recorded)."""
    since = minute_of(now) - MINUTE
    if _recorded.get("minute") == since or PoolSample.objects.filter(at=since).exists():
        _recorded["minute"] = since
        return 0
    rows = _sample(since, since + MINUTE)
    PoolSample.objects.bulk_create(rows, ignore_conflicts=True)
    _recorded["minute"] = since
    return len(rows)


_COUNTS = ("due", "queued", "running", "succeeded", "failed", "cancelled")


def _sample(since: datetime, end: datetime) -> list[PoolSample]:
    samples: dict[tuple[str, int | None], PoolSample] = {
        (pool, None): PoolSample(at=since, pool=pool, tenant_id=None) for pool in job_registry.pools()
    }

    def of(pool: str, tenant_id: int | None) -> PoolSample:
        key = (pool, tenant_id)
        if key not in samples:
            samples[key] = PoolSample(at=since, pool=pool, tenant_id=tenant_id)
        return samples[key]

    executions = Execution.objects.order_by()
    # The due backlog as GET /v1/pools counts it (executions/backlog.py): what a paused job or
    # pool holds is no queue for the workers.
    for (pool, tenant_id), due in due_work(executions, now=end, by=("pool", "tenant_id")).items():
        if due.backlog:
            of(pool, tenant_id).due = due.backlog
    # One grouped count per state, each a walk of an index of that state's rows only: the cost
    # follows the live work, never the history (an OR of the states could scan the table).
    for field_name, live_work in (
        ("queued", executions.filter(state=S.QUEUED)),
        ("running", executions.filter(state=S.RUNNING)),
    ):
        for pool, tenant_id, n in live_work.values_list("pool", "tenant_id").annotate(n=Count("pk")):
            setattr(of(pool, tenant_id), field_name, n)
    finished = (
        executions.filter(finished_at__gte=since, finished_at__lt=end, state__in=[S.SUCCEEDED, S.DEAD, S.CANCELLED])
        .values_list("pool", "tenant_id", "state")
        .annotate(n=Count("pk"))
    )
    outcome = {S.SUCCEEDED: "succeeded", S.DEAD: "failed", S.CANCELLED: "cancelled"}
    for pool, tenant_id, state, n in finished:
        setattr(of(pool, tenant_id), outcome[state], n)
    # Started in the minute: still running, or finished since (a start precedes its end).
    started = executions.filter(
        Q(state=S.RUNNING) | Q(finished_at__gte=since), started_at__gte=since, started_at__lt=end
    ).values_list("pool", "tenant_id", "started_at", "available_at", "created_at")
    lags: dict[tuple[str, int | None], list[float]] = defaultdict(list)
    for pool, tenant_id, started_at, available_at, created_at in started:
        assert started_at is not None  # filtered on
        lag = start_lag_seconds(started_at=started_at, available_at=available_at, created_at=created_at)
        lags[(pool, tenant_id)].append(lag)
        lags[(pool, None)].append(lag)
    for tenant_sample in [sample for (_, tenant_id), sample in samples.items() if tenant_id is not None]:
        total = of(tenant_sample.pool, None)
        for name in _COUNTS:
            setattr(total, name, getattr(total, name) + getattr(tenant_sample, name))
    for (pool, tenant_id), values in lags.items():
        sample = of(pool, tenant_id)
        sample.started = len(values)
        sample.lag_p50_ms = _ms(percentile(values, 0.5))
        sample.lag_p99_ms = _ms(percentile(values, 0.99))
    return list(samples.values())


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def prune(*, now: datetime) -> int:
    """Forget the minutes older than HISTORY. Returns how many rows."""
    deleted, _ = PoolSample.objects.filter(at__lt=now - HISTORY).delete()
    return deleted


# --- Reading -------------------------------------------------------------------------------------------


@dataclass
class Bucket:
    at: datetime
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    started: int = 0
    lag_p50_ms: float | None = None  # the minutes' p50s, weighted by their starts: an estimate
    lag_p99_ms: float | None = None  # the worst minute's p99: an upper bound of the bucket's
    due: dict[str, int] = field(default_factory=dict)  # per pool: the most due at a minute's end
    admitted: dict[str, int] = field(default_factory=dict)  # per pool: the most QUEUED + RUNNING


def history(*, scope: list[int] | None, since: datetime, end: datetime, bucket: timedelta) -> list[Bucket]:
    """Buckets of `bucket` from `since` to `end` (both on a bucket's edge), summed over the tenants
    of `scope` (None: all, from the pools' totals): one read of the samples in that range,
    bucketed in the database."""
    count = max(int((end - since) / bucket), 0)
    buckets = [Bucket(at=since + i * bucket) for i in range(count)]
    weighted: list[float] = [0.0] * count
    rows = store().pool_buckets(since=since, end=end, bucket_seconds=int(bucket.total_seconds()), tenant_ids=scope)
    for i, pool, due, admitted, succeeded, failed, cancelled, started, p50_weighted, p99 in rows:
        if not 0 <= i < count:
            continue
        b = buckets[i]
        b.due[pool], b.admitted[pool] = int(due or 0), int(admitted or 0)
        b.succeeded += int(succeeded or 0)
        b.failed += int(failed or 0)
        b.cancelled += int(cancelled or 0)
        if started:
            b.started += int(started)
            weighted[i] += float(p50_weighted or 0.0)
            b.lag_p99_ms = max(b.lag_p99_ms or 0.0, float(p99 or 0.0))
    for i, b in enumerate(buckets):
        if b.started:
            b.lag_p50_ms = round(weighted[i] / b.started, 1)
    return buckets
