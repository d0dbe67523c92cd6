"""The dashboard's Workers page: every worker the registry has (live first, offline ones flagged),
what each ran of the caller's tenants in the last hour, and the pools with their pause and resume
(staff only, audited). The workers' table is read again every few seconds, so a worker that
stops or dies is flagged offline without a reload. Thin like every page (dashboard/frame.py: login,
scoping, the page frame)."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard.fleet import workers as fleet
from dashboard.fleet.actions import pool_pause_audited, pool_resume_audited
from dashboard.frame import ScopedRequest, operator_view, redirect_back, render_page
from dashboard.services import ActionRefused, Actor
from executions.clock import db_now
from jobs import registry as job_registry
from pools.registry import offline_after

# How often an open page reads the workers' table again: well within the offline bound.
POLL_MS = 2000


def _workers_context(request: ScopedRequest) -> dict:
    now = db_now()
    return {
        "workers": fleet.workers(scope=request.tenant_scope, now=now),
        "offline_after": offline_after().total_seconds(),
        "poll_ms": POLL_MS,
        "now": now,
        "is_staff": request.tenant_scope is None,
    }


@require_GET
@operator_view
def workers_page(request: ScopedRequest) -> HttpResponse:
    context = _workers_context(request)
    context.update(section="workers", pools=fleet.pools(now=context["now"]))
    return render_page(request, "dashboard/workers.html", context)


@require_GET
@operator_view
def workers_table(request: ScopedRequest) -> HttpResponse:
    return render(request, "dashboard/_workers_table.html", _workers_context(request))


@require_POST
@operator_view
def pool_action(request: ScopedRequest, pool: str, action: str) -> HttpResponse:
    """Pause or resume a whole pool. Staff only: a pool is shared by every tenant."""
    if action not in ("pause", "resume"):
        raise Http404("no such action")
    if request.tenant_scope is not None:
        raise PermissionDenied("only staff may pause or resume a pool")
    if pool not in job_registry.pools():
        raise Http404("no such pool")
    actor, now = Actor.of(request), db_now()
    try:
        if action == "pause":
            reason = request.POST.get("reason", "").strip()[:500]
            change = pool_pause_audited(actor=actor, pool=pool, reason=reason, now=now)
            messages.success(request, f"Pool {pool} paused." if change.changed else f"Pool {pool} was paused already.")
        else:
            change = pool_resume_audited(actor=actor, pool=pool, now=now)
            messages.success(request, f"Pool {pool} resumed." if change.changed else f"Pool {pool} was not paused.")
    except ActionRefused as exc:
        messages.error(request, f"Pool {pool}: {action} refused — {exc}.")
    return redirect_back(request, reverse("dashboard:workers"))
