"""Pool history, a minute at a time: the sweeper records, as each minute ends, one
PoolSample row per pool for every tenant together (every known pool, even a quiet one: a zero
is not a gap) and one per (pool, tenant) with anything to say: its queue then, what finished and
started in the minute, the start lag of those starts. Pruned after HISTORY. The dashboard's
charts read them for ranges of hours and days (readmodels/pool_history.py), when the executions
of those days (hundreds of thousands) would be too many to read per page: staff read the totals,
a member its tenants' rows.

A minute is recorded once, after it ended (by the database's clock), by whichever sweeper gets
to it: the unique constraints make a second sweeper's rows no-ops. A minute in which no sweeper
ran stays unrecorded: the charts show a gap, not a guess.

Reads are bounded: the queue's counts walk the partial indexes of live work (due, QUEUED,
RUNNING), what finished in the minute a range of the finished_at index.

Bookkeeping of the minute, not work to take back: never a reason to sweep again at once. The
samples past HISTORY go with the rest of what is forgotten (retention.py, `prune` below)."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Self

from django.db.models import Count, Q

from background.service import Counts, Needs
from executions.models import Execution
from executions.states import ExecutionState
from jobs import registry as job_registry
from pools.models import PoolSample
from readmodels.backlog import due_work
from readmodels.start_lag import start_lag_seconds
from store import percentile

S = ExecutionState
HISTORY = timedelta(days=8)
MINUTE = timedelta(minutes=1)
_recorded: dict[str, datetime] = {}  # this process's last recorded minute: it is not asked again


@dataclass
class Recorded(Counts):
    bookkeeping = True
    samples: int = 0


class PoolHistory:
    name = "pool_history"

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls()

    def run_once(self, *, now: datetime) -> Recorded:
        return Recorded(samples=record(now=now))


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
    # The due backlog as GET /v1/pools counts it (readmodels/backlog.py): what a paused job or
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
