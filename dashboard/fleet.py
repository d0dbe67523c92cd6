"""Reads for the fleet: the workers as the registry has them (pools/registry.py), the pools'
pauses, and the overview's charts over a chosen range.

Workers and pools are shared by every tenant, so they are shown whole to everyone; what they ran
is counted over the caller's `scope` only (a member sees its tenants' runs, staff all), as
`GET /v1/pools` does.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count

from dashboard import time_axis
from dashboard.selectors import LastHour
from executions.clock import db_now
from executions.states import ExecutionState
from jobs import registry as job_registry
from pools import registry
from pools.models import PoolPause
from pools.models import Worker as WorkerRow
from readmodels.pool_history import Bucket, history
from readmodels.selectors import execution_list

S = ExecutionState
# The most registry rows the page lists (live ones first); the sweeper forgets a worker a day
# after it was last seen, so this is a day of a large fleet's restarts.
WORKERS_SHOWN = 200
RUNNING_SAMPLE = 5  # of a worker's RUNNING executions, how many the page links to
WINDOW = timedelta(hours=1)


@dataclass
class Worker:
    row: WorkerRow
    live: bool
    processed: int = 0  # runs of it that finished in the last hour (in scope), any outcome
    failed: int = 0  # of those, the ones that went DEAD
    running: list[Any] = field(default_factory=list)  # a few of its RUNNING ({id, job__name}), in scope

    @property
    def offline_reason(self) -> str:
        if self.live:
            return ""
        return "stopped" if self.row.stopped_at else "not seen"

    @property
    def utilisation(self) -> int:
        """Busy slots, in percent, as it last reported (0 when offline: it holds nothing)."""
        return round(100 * self.row.busy / self.row.slots) if self.live and self.row.slots else 0

    @property
    def name(self) -> str:
        return f"{self.row.hostname}:{self.row.pid}"


def workers(*, scope: list[int] | None, now: datetime) -> list[Worker]:
    """The registry's workers, live first, each with what of the caller's scope it finished in
    the last hour and a few of its RUNNING executions. Three reads: the registry (its
    last-seen index; live as pools.registry.live says, by the database's clock `now`), the last
    hour of the finished_at index grouped by worker and state, and the RUNNING partial index.
    Runs are matched to a worker by "host:pid" against the pids it reported (its main process
    and its pool's); when a pid was reused by a later worker on the same host, the newest one
    gets its runs."""
    rows = list(WorkerRow.objects.order_by("-last_seen_at")[:WORKERS_SHOWN])
    found = {r.pk: Worker(row=r, live=registry.is_live(r, now)) for r in rows}
    owner: dict[str, int] = {}
    for r in sorted(rows, key=lambda r: r.started_at):  # the newest start wins a reused pid
        for pid in {r.pid, *r.pids}:
            owner[f"{r.hostname}:{pid}"] = r.pk
    executions = execution_list(scope=scope).order_by()
    finished = (
        executions.filter(finished_at__gte=now - WINDOW, state__in=[S.SUCCEEDED, S.DEAD, S.CANCELLED])
        .exclude(worker_id="")
        .values_list("worker_id", "state")
        .annotate(n=Count("pk"))
    )
    for worker_id, state, n in finished:
        if worker_id in owner:
            worker = found[owner[worker_id]]
            worker.processed += n
            worker.failed += n if state == S.DEAD else 0
    running = (
        executions.filter(state=S.RUNNING, worker_id__in=list(owner))
        .order_by("started_at")
        .values("id", "worker_id", "job__name")[: RUNNING_SAMPLE * 20]
    )
    for execution in running:
        worker = found[owner[execution["worker_id"]]]
        if len(worker.running) < RUNNING_SAMPLE:
            worker.running.append(execution)
    return sorted(found.values(), key=lambda w: (not w.live, w.row.hostname, w.row.pid))


@dataclass(frozen=True)
class PoolRow:
    pool: str
    workers: int
    slots: int
    busy: int
    pause: PoolPause | None


def pools(*, now: datetime) -> list[PoolRow]:
    """Every known pool with its live capacity and whether it is paused: the registry and the
    pauses, a few rows each."""
    capacity = registry.capacity(now)
    pauses = {p.pool: p for p in PoolPause.objects.all()}
    empty = registry.Capacity(0, 0, 0)
    return [
        PoolRow(
            pool,
            capacity.get(pool, empty).workers,
            capacity.get(pool, empty).slots,
            capacity.get(pool, empty).busy,
            pauses.get(pool),
        )
        for pool in sorted(set(job_registry.pools()) | set(capacity) | set(pauses))
    ]


# --- The overview's charts over a range ------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    key: str  # as the URL says it: ?range=24h
    label: str
    span: timedelta
    bucket: timedelta
    bucket_label: str
    label_format: str  # a bucket's time in its tooltip; the axis is labelled by dashboard/time_axis.py


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
