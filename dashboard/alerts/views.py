"""The dashboard's alerts: the banner every page shows while an alert of the caller's is FIRING
(read again every few seconds, so it appears and goes without a reload), and the page listing
active and recent alerts with their summaries and notifications, and the rules. Thin like
every page (dashboard/frame.py: login, scoping, the page frame)."""

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from alerts.selectors import alert_list, rule_list
from dashboard.alerts.banner import banner_context
from dashboard.frame import ScopedRequest, operator_view, page_number, pager, render_page

PAGE_SIZE = 50


@require_GET
@operator_view
def alert_banner(request: ScopedRequest) -> HttpResponse:
    return render(request, "dashboard/_alert_banner.html", banner_context(request.tenant_scope))


@require_GET
@operator_view
def alerts_page(request: ScopedRequest) -> HttpResponse:
    page = page_number(request)
    start = (page - 1) * PAGE_SIZE
    alerts = list(alert_list(scope=request.tenant_scope).order_by("state", "-fired_at")[start : start + PAGE_SIZE + 1])
    return render_page(
        request,
        "dashboard/alerts.html",
        {
            "section": "alerts",
            "alerts": alerts[:PAGE_SIZE],
            "pager": pager(request, page, len(alerts) > PAGE_SIZE),
            "rules": list(rule_list(scope=request.tenant_scope)[:100]),
        },
    )
