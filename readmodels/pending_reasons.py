"""Why an execution that has not started yet is waiting: `pendingReason` and `pendingDetail`.

Read at request time from the same facts admission decides by (scheduling/admission.py): the
due time, the job's state, the tenant's concurrency limit, the pool's live workers and what it
has admitted, and who else has due work in the pool. The first that holds is the reason:

- JOB_PAUSED: the job is paused; nothing of it is admitted until it is resumed.
- POOL_PAUSED: an operator paused its pool; nothing of it is admitted until the pool is resumed.
- RATE_LIMITED: it was over its named rate limit when chosen, and waits for the turn it was
  given (scheduling/rate_limiting.py).
- NOT_DUE: its time has not come.
- TENANT_CONCURRENCY_LIMIT: the tenant has as many executions QUEUED or RUNNING as it may.
- NO_WORKERS: no live worker serves its pool.
- FAIR_SHARE: other tenants with due work in the pool take their turns first (by weight).
- POOL_AT_CAPACITY: the pool's slots are taken; it is next in line as one frees (or, if a slot
  is free, the dispatcher admits it at its next look, within a fraction of a second).
- ON_BROKER: admitted and published (QUEUED); waiting for a worker of its pool to take it.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from executions.models import Execution
from executions.states import ExecutionState
from jobs.models import Job, Priority
from jobs.states import JobState
from pools import rate_limits, registry
from readmodels.durations import from_now
from scheduling import rate_limiting
from store import store
from tenants.models import Tenant

S = ExecutionState
REASONS = [
    "NOT_DUE",
    "RATE_LIMITED",
    "JOB_PAUSED",
    "POOL_PAUSED",
    "TENANT_CONCURRENCY_LIMIT",
    "POOL_AT_CAPACITY",
    "NO_WORKERS",
    "FAIR_SHARE",
    "ON_BROKER",
]


@dataclass(frozen=True)
class Reason:
    code: str
    detail: str


def pending_reasons(executions: Sequence[Execution], *, now: datetime) -> dict[Any, Reason]:
    """The reason of each of `executions` that is PENDING or QUEUED, by id."""
    waiting = [e for e in executions if e.state in (S.PENDING, S.QUEUED)]
    if not waiting:
        return {}
    return _Facts(waiting, now).reasons()


class _Facts:
    """What the reasons are read from, each read once for the whole batch."""

    def __init__(self, waiting: list[Execution], now: datetime) -> None:
        self.waiting, self.now = waiting, now
        snapshot = store().snapshot(live_since=now - registry.offline_after())  # as the claim reads it
        self.capacity = registry.totals(snapshot.workers)
        self.paused_pools = snapshot.paused
        self.admitted: Counter[str] = Counter()
        self.busy_of_tenant: Counter[int] = Counter()
        for pool, tenant_id, _state, count in snapshot.admitted:
            self.admitted[pool] += count
            self.busy_of_tenant[tenant_id] += count
        self.paused = set(
            Job.objects.filter(pk__in={e.job_id for e in waiting}, state=JobState.PAUSED).values_list("pk", flat=True)
        )
        self.tenants = {t.pk: t for t in Tenant.objects.filter(pk__in={e.tenant_id for e in waiting})}
        self.heads: dict[str, list[tuple[int, int, datetime]]] = {}  # per pool, read when needed
        turned = [e.pk for e in waiting if e.rate_turn_at is not None and e.available_at > now]
        self.limit_names = rate_limiting.limit_names(turned)
        self.limits = rate_limits.read() if turned else {}

    def reasons(self) -> dict[Any, Reason]:
        return {e.pk: self.reason(e) for e in self.waiting}

    def reason(self, e: Execution) -> Reason:
        pool = self.capacity.get(e.pool)
        tenant = self.tenants[e.tenant_id]
        if e.state == S.QUEUED:
            where = (
                f"{pool.busy} of {pool.slots} slots of pool {e.pool} are busy"
                if pool
                else f"no live worker serves pool {e.pool}"
            )
            return Reason("ON_BROKER", f"published to the broker; waiting for a worker to take it ({where})")
        if e.job_id in self.paused:
            return Reason("JOB_PAUSED", "its job is paused; it waits until the job is resumed")
        if e.pool in self.paused_pools:
            return Reason("POOL_PAUSED", f"pool {e.pool} is paused; nothing of it is admitted until it is resumed")
        if e.pk in self.limit_names and e.available_at > self.now:
            name = self.limit_names[e.pk]
            limit = self.limits[name].describe() if name in self.limits else name
            seconds = (e.available_at - self.now).total_seconds()
            return Reason(
                "RATE_LIMITED",
                f"rate limit {limit} is reached; its turn comes at {e.available_at.isoformat()} ({from_now(seconds)})",
            )
        if e.available_at > self.now:
            seconds = (e.available_at - self.now).total_seconds()
            return Reason("NOT_DUE", f"due at {e.available_at.isoformat()} ({from_now(seconds)})")
        cap = tenant.max_concurrent_executions
        if cap is not None and self.busy_of_tenant[tenant.pk] >= cap:
            runs = self.busy_of_tenant[tenant.pk]
            detail = f"tenant {tenant.slug} runs {runs} of its {cap} allowed executions"
            return Reason("TENANT_CONCURRENCY_LIMIT", detail)
        if pool is None:
            return Reason("NO_WORKERS", f"no live worker serves pool {e.pool}; it waits for one to start")
        load = f"{self.admitted[e.pool]} admitted for {pool.slots} slots, {pool.busy} busy"
        ahead = self._others_ahead(e)
        if ahead:
            return Reason(
                "FAIR_SHARE",
                f"pool {e.pool} is shared ({load}): {ahead} other tenant(s) with due work take their turns"
                f" first, in proportion to their weights (tenant {tenant.slug}'s weight is {tenant.weight})",
            )
        if self.admitted[e.pool] >= pool.slots:
            return Reason("POOL_AT_CAPACITY", f"pool {e.pool} is full ({load}); it is next in line for a slot")
        return Reason("POOL_AT_CAPACITY", f"pool {e.pool} has room ({load}); the dispatcher admits it at its next look")

    def _others_ahead(self, e: Execution) -> int:
        """How many other tenants have work due in the pool at a higher priority, or at the same
        priority due no later than this execution (of equal turns, the older work goes first)."""
        if e.pool not in self.heads:
            tenant_ids = list(Tenant.objects.values_list("pk", flat=True))
            self.heads[e.pool] = [
                (tenant_id, priority, earliest)
                for priority in Priority.values
                for tenant_id, earliest in store().due_heads(
                    pool=e.pool, priority=priority, tenant_ids=tenant_ids, now=self.now
                )
            ]
        return len(
            {
                tenant_id
                for tenant_id, priority, earliest in self.heads[e.pool]
                if tenant_id != e.tenant_id
                and (priority < e.priority or (priority == e.priority and earliest <= e.available_at))
            }
        )
