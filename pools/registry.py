"""The worker registry: each worker process group says what it serves and can take, and keeps
saying it; the dispatcher admits work by it, `GET /v1/pools` and the dashboard show it.

A worker is live while it has reported within `offline_after()` (by the database's clock, as
every `now` here is) and has not stopped. One that is killed simply stops reporting: its slots
stop counting after that bound. Its running executions are not its registry's business: their
leases expire and the sweeper retries them."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from pools.models import Worker


@dataclass(frozen=True)
class Capacity:
    """What the live workers of one pool offer."""

    workers: int
    slots: int
    busy: int
    rate: float = 0.0  # runs taken per second, as the workers last reported


def offline_after() -> timedelta:
    return timedelta(seconds=settings.TICKWORK_WORKER_OFFLINE_SECONDS)


def live(now: datetime) -> Q:
    """The condition for a worker row to count at `now`."""
    return Q(stopped_at__isnull=True, last_seen_at__gte=now - offline_after())


def is_live(worker: Worker, now: datetime) -> bool:
    """`live`, of a row already read."""
    return worker.stopped_at is None and worker.last_seen_at >= now - offline_after()


def register(
    *, hostname: str, pid: int, pools: Sequence[str], slots: int, now: datetime, pids: Sequence[int] = ()
) -> int:
    """A worker process group has started serving `pools` with `slots` slots. Returns its row's id."""
    worker = Worker.objects.create(
        hostname=hostname,
        pid=pid,
        pools=sorted(set(pools)),
        pids=sorted({pid, *pids}),
        slots=slots,
        started_at=now,
        last_seen_at=now,
    )
    return worker.pk


def beat(
    *, worker_id: int, busy: int, processed: int, rate: float, now: datetime, pids: Sequence[int] | None = None
) -> bool:
    """The worker is still there, with `busy` slots taken, having taken `processed` runs since it
    started, `rate` a second lately, its processes having been `pids` (None: unchanged). False if
    its row is gone or stopped (pruned after a long pause, say): it should register again."""
    changes: dict = {"busy": busy, "processed": processed, "rate": rate, "last_seen_at": now}
    if pids is not None:
        changes["pids"] = sorted(pids)
    return bool(Worker.objects.filter(pk=worker_id, stopped_at__isnull=True).update(**changes))


def deregister(*, worker_id: int, now: datetime) -> None:
    """A clean stop: its slots stop counting at once. The row stays, for the operator to see."""
    Worker.objects.filter(pk=worker_id, stopped_at__isnull=True).update(stopped_at=now, busy=0)


def capacity(now: datetime) -> dict[str, Capacity]:
    """Per pool, what its live workers offer. A worker serving several pools counts in each:
    its slots are shared, so the pools' capacities are not to be added up."""
    return totals(Worker.objects.filter(live(now)).values_list("pools", "slots", "busy", "rate"))


def totals(workers: Iterable[tuple]) -> dict[str, Capacity]:
    """`capacity` of the live workers' (pools, slots, busy, rate), however they were read; a row
    may stand for several workers' sums, their number fifth (the claim's snapshot: per pool)."""
    sums: dict[str, Capacity] = {}
    for pools, slots, busy, rate, *many in workers:
        count = many[0] if many else 1
        for pool in pools:
            have = sums.get(pool, Capacity(0, 0, 0))
            sums[pool] = Capacity(have.workers + count, have.slots + slots, have.busy + busy, have.rate + rate)
    return sums


def prune(*, now: datetime, older_than: timedelta) -> int:
    """Forget workers not seen for `older_than` (stopped or gone). Returns how many."""
    deleted, _ = Worker.objects.filter(last_seen_at__lt=now - older_than).delete()
    return deleted
