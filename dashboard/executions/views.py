"""The executions pages: the list (latest activity first, one search box, filters: listing.py),
an execution with its events, attempts, audit and logs panel (logs.py, which the page reads again
on its own while the execution runs), and the actions on one execution or on a selection
(cancel, retry: the dead-letter view's "Retry selected")."""

import uuid

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import selectors, services
from dashboard.executions import actions, listing, logs
from dashboard.executions.rows import CANCELLABLE, REDRIVABLE, with_pending_reasons
from dashboard.frame import (
    ScopedRequest,
    operator_view,
    page_number,
    pager,
    parse_when,
    redirect_back,
    render_page,
    selected_ids,
)
from dashboard.services import ActionRefused, Actor
from executions.clock import db_now
from executions.states import ExecutionState
from jobs import registry
from readmodels.pending_reasons import pending_reasons
from readmodels.selectors import execution_get, execution_list

S = ExecutionState


def _filters(request: ScopedRequest) -> listing.ExecutionFilters:
    state = request.GET.get("state", "")
    return listing.ExecutionFilters(
        state=state if state in S.values else "",
        pool=request.GET.get("pool", ""),
        tenant=request.GET.get("tenant", ""),
        job=request.GET.get("job", ""),
        since=parse_when(request.GET.get("since", "")),
        until=parse_when(request.GET.get("until", "")),
        q=request.GET.get("q", "").strip()[:200],
        after=listing.parse_cursor(request.GET.get("after", "")),
    )


@require_GET
@operator_view
def execution_list_view(request: ScopedRequest) -> HttpResponse:
    filters = _filters(request)
    page = page_number(request)
    result = listing.execution_page(scope=request.tenant_scope, filters=filters, page=page, now=timezone.now())
    with_pending_reasons(result.rows)
    dead_letter = filters.state == S.DEAD
    return render_page(
        request,
        "dashboard/execution_list.html",
        {
            "section": "dead" if dead_letter else "executions",
            "dead_letter": dead_letter,
            "executions": result.rows,
            "narrowed_to": result.narrowed_to,
            "gave_up": result.gave_up,
            "history_of": result.history_of,
            "filters": filters,
            "raw": {name: request.GET.get(name, "") for name in ("since", "until")},
            "states": [s.value for s in selectors.STATE_ORDER],
            "pools": registry.pools(),
            "pager": pager(request, page, result.has_next, after=result.next_after),
            "cancellable": CANCELLABLE,
            "redrivable": REDRIVABLE,
            "here": request.get_full_path(),
        },
    )


def _execution_or_404(request: ScopedRequest, execution_id):
    execution = execution_get(scope=request.tenant_scope, execution_id=execution_id)
    if execution is None:
        raise Http404("no such execution")
    return execution


@require_GET
@operator_view
def execution_detail(request: ScopedRequest, execution_id: uuid.UUID) -> HttpResponse:
    execution = _execution_or_404(request, execution_id)
    events = selectors.execution_events_of(execution=execution)
    return render_page(
        request,
        "dashboard/execution_detail.html",
        {
            "section": "executions",
            "execution": execution,
            "job": execution.job,
            "events": events,
            "attempts": selectors.attempts_of(events=events),
            "audit": selectors.audit_for_execution(scope=request.tenant_scope, execution=execution),
            "can_cancel": execution.state in CANCELLABLE,
            "can_retry": execution.state in REDRIVABLE,
            "pending": pending_reasons([execution], now=db_now()).get(execution.pk),
            "logs": logs.logs_panel(execution=execution, attempt=request.GET.get("logs")),
            "here": request.get_full_path(),
        },
    )


@require_GET
@operator_view
def execution_logs(request: ScopedRequest, execution_id: uuid.UUID) -> HttpResponse:
    """The logs panel on its own: what the execution page reads again every second while it runs."""
    execution = _execution_or_404(request, execution_id)
    panel = logs.logs_panel(execution=execution, attempt=request.GET.get("attempt"))
    return render(request, "dashboard/_execution_logs.html", {"logs": panel})


@require_POST
@operator_view
def execution_action(request: ScopedRequest, execution_id: uuid.UUID, action: str) -> HttpResponse:
    if action not in ("cancel", "retry"):
        raise Http404("no such action")
    actor = Actor.of(request)
    execution = execution_get(scope=request.tenant_scope, execution_id=execution_id)
    if execution is None:
        services.audit_not_found(
            actor=actor,
            action=f"execution.{action}",
            target_type="execution",
            target_id=str(execution_id),
            now=db_now(),
        )
        raise Http404("no such execution")
    try:
        if action == "cancel":
            state = actions.execution_cancel_audited(actor=actor, execution=execution, now=db_now())
            messages.success(
                request, "Cancelled." if state == S.CANCELLED else "Cancel requested; the worker stops it shortly."
            )
        else:
            redriven = actions.execution_retry_audited(actor=actor, execution=execution, now=db_now())
            messages.success(request, f"Re-driven: attempt {redriven.attempt} is pending.")
    except ActionRefused as exc:
        messages.error(request, f"{action.capitalize()} refused — {exc}.")
    return redirect_back(request, reverse("dashboard:execution-detail", args=[execution.pk]))


@require_POST
@operator_view
def executions_retry(request: ScopedRequest) -> HttpResponse:
    """Re-drive the selected executions (the dead-letter view's "Retry selected")."""
    actor = Actor.of(request)
    wanted = selected_ids(request)
    found = execution_list(scope=request.tenant_scope).select_related("job").in_bulk(wanted)
    now = db_now()
    for missing in set(wanted) - set(found):
        services.audit_not_found(
            actor=actor, action="execution.retry", target_type="execution", target_id=str(missing), now=now
        )
    if not wanted:
        messages.warning(request, "Nothing selected.")
    else:
        result = actions.executions_retry_audited(actor=actor, executions=list(found.values()), now=now)
        if result.done:
            messages.success(request, f"Re-driven {len(result.done)} execution(s).")
        for execution, reason in result.refused:
            messages.error(request, f"{execution.pk}: {reason}")
        if len(found) < len(wanted):
            messages.error(request, f"{len(wanted) - len(found)} execution(s) not found.")
    return redirect_back(request, reverse("dashboard:executions") + "?state=DEAD")
