"""The run page: a workflow run's state, its steps drawn as a graph, and a table of them.

Thin like dashboard/views.py, whose login, scoping and page frame it uses: it reads through
dashboard/runs.py and renders. The page's one live region is marked with the run's id
(data-live-run): when the feed reports an event of one of the run's executions, the page fetches
itself again and swaps the region in (static/dashboard/app.js), so the graph's colours and the
table follow the rows.
"""

import uuid

from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET

from dashboard import runs
from dashboard.views import ScopedRequest, _page, operator_view


@require_GET
@operator_view
def run_detail(request: ScopedRequest, run_id: uuid.UUID) -> HttpResponse:
    run = runs.run_get(scope=request.tenant_scope, run_id=run_id)
    if run is None:
        raise Http404("no such run")
    return _page(
        request,
        "dashboard/run_detail.html",
        {
            "section": "jobs",
            "run": run,
            "job": run.job,
            "detail": runs.run_detail(scope=request.tenant_scope, run=run),
        },
    )
