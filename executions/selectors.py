from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db.models import Count, Min, QuerySet

from executions.models import Execution, ExecutionEvent
from jobs import registry as job_registry
from pools import registry


def execution_list(*, scope: list[int] | None) -> QuerySet[Execution]:
    executions = Execution.objects.all()
    return executions if scope is None else executions.filter(tenant_id__in=scope)


def execution_get(*, scope: list[int] | None, execution_id) -> Execution | None:
    try:
        return execution_list(scope=scope).select_related("job").filter(pk=execution_id).first()
    except ValidationError:  # a malformed id is simply not found
        return None


def execution_events(*, execution: Execution) -> QuerySet[ExecutionEvent]:
    return ExecutionEvent.objects.filter(execution=execution).order_by("at", "id")


def latest_executions(*, job_id, limit: int = 10) -> list[Execution]:
    return list(Execution.objects.filter(job_id=job_id).order_by("-scheduled_for", "-created_at")[:limit])


@dataclass(frozen=True)
class PoolOverview:
    pool: str
    workers: int
    slots: int
    busy: int
    queued: int
    running: int
    due_backlog: int
    oldest_due_at: datetime | None


def pool_overviews(*, scope: list[int] | None, now: datetime) -> list[PoolOverview]:
    """Per pool: its live workers and their slots (shared by every tenant, so shown whole), and
    the work admitted and due in it, counted over the tenants of `scope` (None: all)."""
    capacity = registry.capacity(now)
    executions = Execution.objects.all() if scope is None else Execution.objects.filter(tenant_id__in=scope)
    admitted: dict[tuple[str, str], int] = {
        (pool, state): n
        for pool, state, n in executions.filter(state__in=["QUEUED", "RUNNING"])
        .values_list("pool", "state")
        .annotate(n=Count("id"))
        .order_by()
    }
    due = {
        pool: (n, oldest)
        for pool, n, oldest in executions.filter(state="PENDING", available_at__lte=now)
        .values_list("pool")
        .annotate(n=Count("id"), oldest=Min("available_at"))
        .order_by()
        .values_list("pool", "n", "oldest")
    }
    pools = sorted(set(job_registry.pools()) | set(capacity) | {p for p, _ in admitted} | set(due))
    empty = registry.Capacity(0, 0, 0)
    return [
        PoolOverview(
            pool=pool,
            workers=capacity.get(pool, empty).workers,
            slots=capacity.get(pool, empty).slots,
            busy=capacity.get(pool, empty).busy,
            queued=admitted.get((pool, "QUEUED"), 0),
            running=admitted.get((pool, "RUNNING"), 0),
            due_backlog=due.get(pool, (0, None))[0],
            oldest_due_at=due.get(pool, (0, None))[1],
        )
        for pool in pools
    ]
