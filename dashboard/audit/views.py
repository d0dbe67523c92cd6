"""The audit page: who did what to which object, from the dashboard, the API or the admin,
filtered by actor, action, outcome, target and kind of actor."""

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from audit.models import ACTIONS, ActorKind, AuditOutcome
from dashboard import selectors
from dashboard.frame import ScopedRequest, operator_view, page_number, pager, render_page


@require_GET
@operator_view
def audit_log(request: ScopedRequest) -> HttpResponse:
    filters = selectors.AuditFilters(
        actor=request.GET.get("actor", "").strip(),
        action=request.GET.get("action", "").strip(),
        outcome=request.GET.get("outcome", ""),
        target=request.GET.get("target", "").strip(),
        kind=request.GET.get("kind", ""),
    )
    page = page_number(request)
    entries, has_next = selectors.audit_page(scope=request.tenant_scope, filters=filters, page=page)
    return render_page(
        request,
        "dashboard/audit.html",
        {
            "section": "audit",
            "entries": entries,
            "filters": filters,
            "outcomes": AuditOutcome.values,
            "actions": ACTIONS,
            "kinds": ActorKind.choices,
            "pager": pager(request, page, has_next),
        },
    )
