"""The pools' history as the dashboard's charts read it: the minute samples the sweeper records
(maintenance/services/pool_history.py) summed into buckets of a chart's range, for ranges of hours and days
whose executions would be too many to read per page."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from store import store


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
