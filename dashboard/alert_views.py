"""The dashboard's alerts: the banner every page shows while an alert of the caller's is FIRING
(read again every few seconds, so it appears and goes without a reload), and the page listing
active and recent alerts with their summaries and notifications, and the rules. Thin like
dashboard/views.py, whose login and scoping it uses."""

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from alerts.selectors import alert_list, rule_list
from dashboard.banner import banner_context
from dashboard.views import ScopedRequest, _page, _page_number, _pager, operator_view

PAGE_SIZE = 50


@require_GET
@operator_view
def alert_banner(request: ScopedRequest) -> HttpResponse:
    return render(request, "dashboard/_alert_banner.html", banner_context(request.tenant_scope))


@require_GET
@operator_view
def alerts_page(request: ScopedRequest) -> HttpResponse:
    page = _page_number(request)
    start = (page - 1) * PAGE_SIZE
    alerts = list(alert_list(scope=request.tenant_scope).order_by("state", "-fired_at")[start : start + PAGE_SIZE + 1])
    return _page(
        request,
        "dashboard/alerts.html",
        {
            "section": "alerts",
            "alerts": alerts[:PAGE_SIZE],
            "pager": _pager(request, page, len(alerts) > PAGE_SIZE),
            "rules": list(rule_list(scope=request.tenant_scope)[:100]),
        },
    )
