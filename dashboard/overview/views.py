"""The overview: jobs and executions by state, the last hour, the pools' queues, and the fleet's
charts over a chosen range (dashboard/overview/charts.py)."""

from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from dashboard import selectors
from dashboard.frame import ScopedRequest, operator_view, render_page
from dashboard.overview import charts
from executions.states import ExecutionState


@require_GET
@operator_view
def overview(request: ScopedRequest) -> HttpResponse:
    now = timezone.now()
    scope = request.tenant_scope
    state_counts = selectors.execution_state_counts(scope=scope)
    hour = selectors.last_hour(scope=scope, now=now)
    dead = next(c for c in state_counts if c.state == ExecutionState.DEAD)
    pools = selectors.queue_depths(scope=scope, now=now)
    return render_page(
        request,
        "dashboard/overview.html",
        {
            "section": "overview",
            "now": now,
            "job_counts": selectors.job_state_counts(scope=scope),
            "state_counts": state_counts,
            "dead": dead,
            "hour": hour,
            "pools": pools,
            "max_depth": max([p.depth for p in pools], default=0) or 1,
            **charts.overview(scope=scope, now=now, range_key=request.GET.get("range"), hour=hour),
        },
    )
