"""Reads for the fleet: the workers as the registry has them (pools/registry.py) and the pools
with their pauses (the Workers page; the overview shows them too, dashboard/overview/charts.py).

Workers and pools are shared by every tenant, so they are shown whole to everyone; what they ran
is counted over the caller's `scope` only (a member sees its tenants' runs, staff all), as
`GET /v1/pools` does.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count

from executions.states import ExecutionState
from jobs import registry as job_registry
from pools import registry
from pools.models import PoolPause
from pools.models import Worker as WorkerRow
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
