"""What every page of the dashboard shares: the login and tenant scope (`operator_view`), the
page frame (`render_page`: the dead-letter badge, the firing alerts' banner, the live cursors),
and the small parsing every list does (page numbers, pagers, times, selected ids, the way back).

The pages themselves live one folder each (dashboard/jobs/, dashboard/executions/, …): a view
parses the request, reads through its page's reads or dashboard.selectors (scoped by
tenants.selectors.scope_of) and acts through its page's actions (which call the same services as
the API and audit every action: dashboard/services.py). No view builds a query of its own.
"""

import uuid
from datetime import UTC, datetime
from functools import wraps
from typing import cast

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme

from dashboard import job_changes, selectors
from dashboard.alerts.banner import banner_context
from executions.states import ExecutionState
from readmodels.selectors import execution_list
from tenants.selectors import scope_of
from web.json_input import printable

LOGIN_URL = reverse_lazy("login")
NAV_DEAD_CAP = 999
# The most ids one bulk action takes (the jobs page's and the dead letter's "… selected").
MAX_BULK = 500


class ScopedRequest(HttpRequest):
    """A request that `operator_view` let through, with the caller's tenant scope on it."""

    tenant_scope: list[int] | None
    live_cursors: tuple[int, int, float] | None  # (execution events, job changes, time), read as it came in


def operator_view(view):
    """Behind login; the caller's tenant scope is computed once, as `request.tenant_scope` (not
    `request.scope`: on ASGI that is the connection's scope dict)."""

    @login_required(login_url=LOGIN_URL)
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        # Filters go into queries, and PostgreSQL refuses a NUL in text: a 400, not a 500.
        nul = sorted({name for name, values in request.GET.lists() for value in [name, *values] if "\x00" in value})
        if nul:
            names = ", ".join(printable(name) for name in nul)
            message = f"a NUL character (\\u0000) in the query parameter(s) {names}"
            return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
        scoped = cast(ScopedRequest, request)
        scoped.tenant_scope = scope_of(user=request.user)
        # The live cursors are read before the page's rows: a change that commits between the two
        # is then above the cursor and reaches the page. Read after, it could cover a change the
        # rows did not show, and the page would wait for it forever.
        scoped.live_cursors = job_changes.live_cursors() if request.method == "GET" else None
        return view(scoped, *args, **kwargs)

    return wrapped


def render_page(request: ScopedRequest, template: str, context: dict) -> HttpResponse:
    """Render a page with what every page shows: the dead-letter badge, the firing alerts' banner
    and the live cursor."""
    scope = request.tenant_scope
    live_after, live_jobs_after, live_at = getattr(request, "live_cursors", None) or job_changes.live_cursors()
    dead, dead_exact = selectors.capped_count(
        execution_list(scope=scope).filter(state=ExecutionState.DEAD), cap=NAV_DEAD_CAP, estimate=False
    )
    context.update(
        nav_dead=min(dead, NAV_DEAD_CAP),
        nav_dead_exact=dead_exact,
        # A live region refresh re-renders the page in the background: it must not consume the
        # flash messages meant for the next page the operator opens.
        live_refresh="X-Live-Refresh" in request.headers,
        live_after=live_after,
        live_jobs_after=live_jobs_after,
        live_at=f"{live_at:.3f}",
        is_staff=scope is None,
        tenants=selectors.tenants_in_scope(scope=scope),
        **banner_context(scope),
    )
    return render(request, template, context)


def page_number(request: ScopedRequest, key: str = "page") -> int:
    try:
        return max(1, min(int(request.GET.get(key, "1")), 10_000))
    except ValueError:
        return 1


def redirect_back(request: ScopedRequest, fallback: str) -> HttpResponseRedirect:
    target = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = fallback
    return HttpResponseRedirect(target)


def parse_when(value: str) -> datetime | None:
    """A filter's time: ISO 8601; a time without an offset is UTC (what the pages show). Turned
    into UTC here: PostgreSQL refuses offsets past ±15:59, which Python reads."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


def selected_ids(request: ScopedRequest) -> list[uuid.UUID]:
    """The ids a bulk action was asked for (`ids`, at most MAX_BULK); what is not an id is skipped."""
    wanted = []
    for raw in request.POST.getlist("ids")[:MAX_BULK]:
        try:
            wanted.append(uuid.UUID(raw))
        except ValueError:
            continue
    return wanted


def _querystring(request: ScopedRequest, **changes) -> str:
    query = request.GET.copy()
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = value
    return query.urlencode()


def pager(request: ScopedRequest, page: int, has_next: bool, key: str = "page", after: str | None = None) -> dict:
    # With a cursor (dashboard/executions/listing.py's activity cursor) the next page starts after
    # the last row shown.
    keyset = after is not None or "after" in request.GET
    return {
        "page": page,
        "prev_qs": _querystring(request, after=None, **{key: None if keyset else str(page - 1)}) if page > 1 else None,
        "next_qs": _querystring(request, **({"after": after} if after else {}), **{key: str(page + 1)})
        if has_next
        else None,
    }
