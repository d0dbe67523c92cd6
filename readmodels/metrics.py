"""What `/metrics` shows (web/metrics.py), read from the store in one go, so that every number
is the whole installation's, whichever process and host did the work, and nothing resets when
a worker process is replaced: the counters from the executions table and the totals of what left
it (executions/tallies.py), the gauges from the executions table, the worker registry and the
roles' registry (pools/), all at the database's clock.

Label cardinality stays bounded however many tenants there are: the labels are `pool` (operator
defined, a handful), `outcome` (the three terminal states) and `role`, and `tenant` appears only
on the finished-executions counter, for at most `max_tenants` tenants: those with the most
finished executions (ties: the older tenant first); the rest, and deleted tenants, are summed
under tenant="_other". The sum over `tenant` of each (pool, outcome) is therefore always the whole
count and never goes down; one tenant's series moves to "_other" when it leaves the top.

The cost is three grouped scans of the executions table (counts, histograms, due and admitted
work: the last on the due and state indexes) and small reads of the totals, workers and roles."""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max

from executions import tallies
from executions.models import Execution
from executions.states import TERMINAL
from executions.tallies import DURATION_BUCKETS, LAG_BUCKETS, Histogram
from pools import registry
from pools.models import Role, Worker
from readmodels.selectors import PoolOverview, pool_overviews
from tenants.models import Tenant

OTHER_TENANTS = "_other"  # the tenant label of every tenant past the cap


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    finished: dict[tuple[str, str, str], int]  # (pool, tenant label, outcome) -> executions ended so
    retries: dict[str, int]  # pool -> attempts beyond the first, made by the retry policy
    lag: dict[str, Histogram]  # pool -> start lag, seconds
    duration: dict[str, Histogram]  # pool -> run duration, seconds
    dead_letter: dict[str, int]  # pool -> DEAD executions now
    pools: list[PoolOverview]  # the gauges of each pool now
    live_workers: int
    last_seen: dict[str, datetime]  # role ("dispatcher", "sweeper") -> its newest process's last unit of work


def top_tenants(finished: Mapping[int, int], *, limit: int) -> list[int]:
    """The tenants that get a label of their own: the `limit` with the most finished executions,
    the older tenant (lower id) first on a tie, so the choice is stable from scrape to scrape."""
    return sorted(finished, key=lambda tenant_id: (-finished[tenant_id], tenant_id))[: max(limit, 0)]


def metrics_snapshot(*, now: datetime, max_tenants: int) -> Snapshot:
    live = tallies.counts(Execution.objects.all())
    folded = tallies.folded()

    finished: Counter[tuple[str, int, str]] = Counter()
    retries: Counter[str] = Counter()
    dead_letter: Counter[str] = Counter()
    for (pool, tenant_id, state), (n, attempts_beyond) in live.items():
        if state in TERMINAL:
            finished[(pool, tenant_id, state)] += n
        retries[pool] += attempts_beyond
        if state == "DEAD":
            dead_letter[pool] += n
    observed = tallies.histograms(Execution.objects.all(), by=("pool",))
    lag = {pool: h[0] for (pool,), h in observed.items()}
    duration = {pool: h[1] for (pool,), h in observed.items()}
    for (pool, tenant_id, state), t in folded.items():
        if t.finished:
            finished[(pool, tenant_id, state)] += t.finished
        retries[pool] += t.retries
        lag[pool] = lag.get(pool, Histogram.empty(LAG_BUCKETS)).plus(t.lag)
        duration[pool] = duration.get(pool, Histogram.empty(DURATION_BUCKETS)).plus(t.duration)

    by_tenant: Counter[int] = Counter()
    for (_, tenant_id, _), n in finished.items():
        by_tenant[tenant_id] += n
    slugs = dict(Tenant.objects.filter(pk__in=top_tenants(by_tenant, limit=max_tenants)).values_list("pk", "slug"))
    labelled: Counter[tuple[str, str, str]] = Counter()
    for (pool, tenant_id, state), n in finished.items():
        labelled[(pool, slugs.get(tenant_id, OTHER_TENANTS), state)] += n

    overviews = pool_overviews(scope=None, now=now)
    for pool in sorted({o.pool for o in overviews} | set(retries) | set(lag) | set(dead_letter)):
        retries.setdefault(pool, 0)
        dead_letter.setdefault(pool, 0)
        lag.setdefault(pool, Histogram.empty(LAG_BUCKETS))
        duration.setdefault(pool, Histogram.empty(DURATION_BUCKETS))
    return Snapshot(
        now=now,
        finished=dict(labelled),
        retries=dict(retries),
        lag=lag,
        duration=duration,
        dead_letter=dict(dead_letter),
        pools=overviews,
        live_workers=Worker.objects.filter(registry.live(now)).count(),
        last_seen=dict(
            Role.objects.order_by().values("kind").annotate(at=Max("last_seen_at")).values_list("kind", "at")
        ),
    )
