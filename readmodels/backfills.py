"""What the API and the job's page read of backfills (scheduling/backfills.py makes them): the
backfills a scope may see, and a backfill's progress as counts."""

from django.db.models import Count, Q, QuerySet

from executions.models import Backfill, BackfillFire, Execution, FireAction
from executions.states import ExecutionState


def backfill_list(*, scope: list[int] | None) -> QuerySet[Backfill]:
    """The backfills a scope may see (None: every tenant's), newest first."""
    found = Backfill.objects.order_by("-created_at", "-pk")
    return found if scope is None else found.filter(tenant_id__in=scope)


def backfill_counts(backfill: Backfill) -> dict[str, int]:
    """Its progress: `fires` (to run or re-run), `skipped`, `released` (made into runs),
    `waiting` (not released yet), and its runs' executions by state (a workflow run's every
    step), each state present with 0 when none."""
    fires = BackfillFire.objects.filter(backfill=backfill)
    by_action = dict(fires.values("action").annotate(n=Count("id")).values_list("action", "n").order_by())
    released = fires.filter(released_at__isnull=False)
    counts = {
        "fires": by_action.get(FireAction.RUN, 0) + by_action.get(FireAction.RERUN, 0),
        "skipped": by_action.get(FireAction.SKIP, 0),
        "released": released.count(),
    }
    counts["waiting"] = counts["fires"] - counts["released"]
    executions = Execution.objects.filter(
        Q(pk__in=released.filter(execution_id__isnull=False).values("execution_id"))
        | Q(run_id__in=released.filter(run_id__isnull=False).values("run_id"))
    )
    by_state = dict(executions.values("state").annotate(n=Count("id")).values_list("state", "n").order_by())
    counts.update({state: by_state.get(state, 0) for state in ExecutionState.values})
    return counts
