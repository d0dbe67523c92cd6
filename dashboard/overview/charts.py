"""The overview's charts over a chosen range (?range=1h|24h|7d): throughput, start lag, and per
pool the due backlog and the admitted work; and what the overview shows of the fleet beside them
(dashboard/fleet/workers.py: the workers, the paused pools)."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dashboard.fleet.workers import workers
from dashboard.overview import time_axis
from dashboard.selectors import LastHour
from executions.clock import db_now
from pools.models import PoolPause
from readmodels.pool_history import Bucket, history


@dataclass(frozen=True)
class Range:
    key: str  # as the URL says it: ?range=24h
    label: str
    span: timedelta
    bucket: timedelta
    bucket_label: str
    label_format: str  # a bucket's time in its tooltip; the axis is labelled by dashboard/overview/time_axis.py


# A chart stays under a hundred points: a minute for an hour, 15 minutes for a day, 2 hours for a week.
RANGES = {
    r.key: r
    for r in (
        Range("1h", "1 h", timedelta(hours=1), timedelta(minutes=1), "minute", "%H:%M"),
        Range("24h", "24 h", timedelta(hours=24), timedelta(minutes=15), "15 minutes", "%a %m-%d %H:%M"),
        Range("7d", "7 d", timedelta(days=7), timedelta(hours=2), "2 hours", "%a %m-%d %H:%M"),
    )
}
DEFAULT_RANGE = "1h"


def chart_range(key: str | None) -> Range:
    """The range the URL asks for; the default (an hour) for anything else."""
    return RANGES.get(key or "", RANGES[DEFAULT_RANGE])


def charts(*, scope: list[int] | None, now: datetime, chosen: Range, hour: LastHour) -> dict[str, Any]:
    """The overview's chart data over `chosen`: throughput and start lag, and per pool the due
    backlog and the admitted work (QUEUED + RUNNING) at each bucket's busiest minute.

    The hour's throughput and lag are the exact reads of `hour` (the executions themselves,
    current to the second); longer ranges read the pools' minute samples (readmodels/pool_history.py),
    a bounded index range whatever the history. The queue's history is only in the samples."""
    end = _edge(now, chosen.bucket) + chosen.bucket
    since = end - chosen.span
    buckets = history(scope=scope, since=since, end=end, bucket=chosen.bucket)
    names = sorted({pool for b in buckets for pool in (*b.due, *b.admitted)})
    data: dict[str, Any] = {
        "range": chosen.key,
        "rangeLabel": chosen.label,
        "minutes": [b.at.strftime(chosen.label_format) for b in buckets],
        "axis": time_axis.label_choices([b.at for b in buckets], chosen.bucket),
        "pools": names,
        "due": {pool: [b.due.get(pool, 0) for b in buckets] for pool in names},
        "admitted": {pool: [b.admitted.get(pool, 0) for b in buckets] for pool in names},
    }
    if chosen.key == "1h":
        exact = hour.chart_data()
        data.update({key: exact[key] for key in ("succeeded", "failed", "cancelled", "p50", "p99")})
    else:
        data.update(_flows(buckets))
    return data


def _flows(buckets: list[Bucket]) -> dict[str, list]:
    return {
        "succeeded": [b.succeeded for b in buckets],
        "failed": [b.failed for b in buckets],
        "cancelled": [b.cancelled for b in buckets],
        "p50": [b.lag_p50_ms for b in buckets],
        "p99": [b.lag_p99_ms for b in buckets],
    }


def _edge(moment: datetime, bucket: timedelta) -> datetime:
    """The start of the bucket `moment` falls in, counted from midnight UTC."""
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + ((moment - midnight) // bucket) * bucket


def overview(*, scope: list[int] | None, now: datetime, range_key: str | None, hour: LastHour) -> dict[str, Any]:
    """What the overview shows of the fleet: its charts over the chosen range, the workers from
    the registry (by the database's clock, as the registry's times are) and the paused pools."""
    chosen = chart_range(range_key)
    fleet = workers(scope=scope, now=db_now())
    return {
        "chart_data": charts(scope=scope, now=now, chosen=chosen, hour=hour),
        "ranges": list(RANGES.values()),
        "chosen_range": chosen,
        "workers": fleet,
        "live_workers": sum(w.live for w in fleet),
        "paused_pools": set(PoolPause.objects.values_list("pool", flat=True)),
    }
