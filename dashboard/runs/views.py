"""The run page: a workflow run's state, its steps drawn as a graph, and a table of them.

Thin like every page: login, scoping and the page frame are dashboard/frame.py's; it reads
through dashboard/runs/reads.py and renders. The page's one live region is marked with the run's id
(data-live-run): when the feed reports an event of one of the run's executions, the page fetches
itself again and swaps the region in (static/dashboard/app.js), so the graph's colours and the
table follow the rows.
"""

import uuid

from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET

from dashboard.frame import ScopedRequest, operator_view, render_page
from dashboard.runs import reads as runs


@require_GET
@operator_view
def run_detail(request: ScopedRequest, run_id: uuid.UUID) -> HttpResponse:
    run = runs.run_get(scope=request.tenant_scope, run_id=run_id)
    if run is None:
        raise Http404("no such run")
    return render_page(
        request,
        "dashboard/run_detail.html",
        {
            "section": "jobs",
            "run": run,
            "job": run.job,
            "detail": runs.run_detail(scope=request.tenant_scope, run=run),
        },
    )
