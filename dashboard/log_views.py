"""The execution page's logs panel on its own (dashboard/logs.py): what the page reads again
every second while the execution runs. Thin like dashboard/views.py, whose login and scoping it
uses."""

import uuid

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard import logs
from dashboard.views import ScopedRequest, _execution_or_404, operator_view


@require_GET
@operator_view
def execution_logs(request: ScopedRequest, execution_id: uuid.UUID) -> HttpResponse:
    execution = _execution_or_404(request, execution_id)
    panel = logs.logs_panel(execution=execution, attempt=request.GET.get("attempt"))
    return render(request, "dashboard/_execution_logs.html", {"logs": panel})
