"""The operator dashboard's pages. Views parse the request, read through dashboard.selectors
(scoped by tenants.selectors.scope_of) and act through dashboard.services (which call the same
services as the API and audit every action). No view builds a query of its own.
"""

import uuid
import zoneinfo
from datetime import UTC, datetime, timedelta
from functools import wraps
from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, LogoutView
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audit.models import ACTIONS, ActorKind
from dashboard import executions_page, fleet, forms, job_changes, logs, runs, selectors, services
from dashboard.banner import banner_context
from dashboard.models import AuditOutcome
from dashboard.services import ActionRefused, Actor, Target
from executions.clock import db_now
from executions.states import ACTIVE as EXECUTION_ACTIVE
from executions.states import REDRIVABLE, ExecutionState
from jobs import registry
from jobs.models import Backoff as BackoffChoice
from jobs.models import ConcurrencyPolicy, JobType, MisfirePolicy, Priority
from jobs.selectors import job_get
from jobs.selectors import job_list as jobs_in_scope
from jobs.states import TERMINAL as JOB_TERMINAL
from jobs.states import JobState
from jobs.versions import changes_between, version_get, version_list
from readmodels.pending_reasons import pending_reasons
from readmodels.selectors import execution_get, execution_list
from tenants.selectors import scope_of, tenant_for_create
from web.json_input import printable

LOGIN_URL = reverse_lazy("login")
S = ExecutionState
# The states in which an execution may still be cancelled.
CANCELLABLE = frozenset({S.PENDING, *EXECUTION_ACTIVE})
NAV_DEAD_CAP = 999


class ScopedRequest(HttpRequest):
    """A request that `operator_view` let through, with the caller's tenant scope on it."""

    tenant_scope: list[int] | None
    live_cursors: tuple[int, int] | None  # (execution events, job changes), read as it came in


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


def _page(request: ScopedRequest, template: str, context: dict) -> HttpResponse:
    """Render a page with what every page shows: the dead-letter badge, the firing alerts' banner
    and the live cursor."""
    scope = request.tenant_scope
    live_after, live_jobs_after = getattr(request, "live_cursors", None) or job_changes.live_cursors()
    dead, dead_exact = selectors.capped_count(
        execution_list(scope=scope).filter(state=S.DEAD), cap=NAV_DEAD_CAP, estimate=False
    )
    context.update(
        nav_dead=min(dead, NAV_DEAD_CAP),
        nav_dead_exact=dead_exact,
        # A live region refresh re-renders the page in the background: it must not consume the
        # flash messages meant for the next page the operator opens.
        live_refresh="X-Live-Refresh" in request.headers,
        live_after=live_after,
        live_jobs_after=live_jobs_after,
        is_staff=scope is None,
        tenants=selectors.tenants_in_scope(scope=scope),
        **banner_context(scope),
    )
    return render(request, template, context)


def _page_number(request: ScopedRequest, key: str = "page") -> int:
    try:
        return max(1, min(int(request.GET.get(key, "1")), 10_000))
    except ValueError:
        return 1


def _redirect_back(request: ScopedRequest, fallback: str) -> HttpResponseRedirect:
    target = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = fallback
    return HttpResponseRedirect(target)


def _parse_when(value: str) -> datetime | None:
    """A filter's time: ISO 8601; a time without an offset is UTC (what the pages show). Turned
    into UTC here: PostgreSQL refuses offsets past ±15:59, which Python reads."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


def _querystring(request: ScopedRequest, **changes) -> str:
    query = request.GET.copy()
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = value
    return query.urlencode()


def _pager(request: ScopedRequest, page: int, has_next: bool, key: str = "page", after: str | None = None) -> dict:
    # With a cursor (executions_page.activity_cursor) the next page starts after the last row shown.
    keyset = after is not None or "after" in request.GET
    return {
        "page": page,
        "prev_qs": _querystring(request, after=None, **{key: None if keyset else str(page - 1)}) if page > 1 else None,
        "next_qs": _querystring(request, **({"after": after} if after else {}), **{key: str(page + 1)})
        if has_next
        else None,
    }


# --- Accounts --------------------------------------------------------------------------------------


class OperatorLoginView(LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True
    next_page = "dashboard:overview"  # a URL name: the view resolves it


class OperatorLogoutView(LogoutView):
    next_page = "login"


# --- Overview -------------------------------------------------------------------------------------


@require_GET
@operator_view
def overview(request: ScopedRequest) -> HttpResponse:
    now = timezone.now()
    scope = request.tenant_scope
    state_counts = selectors.execution_state_counts(scope=scope)
    hour = selectors.last_hour(scope=scope, now=now)
    dead = next(c for c in state_counts if c.state == S.DEAD)
    pools = selectors.queue_depths(scope=scope, now=now)
    return _page(
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
            **fleet.overview(scope=scope, now=now, range_key=request.GET.get("range"), hour=hour),
        },
    )


# --- Jobs -----------------------------------------------------------------------------------------


def _job_or_404(request: ScopedRequest, job_id):
    job = job_get(scope=request.tenant_scope, job_id=job_id)
    if job is None:
        raise Http404("no such job")
    return job


@require_GET
@operator_view
def job_list(request: ScopedRequest) -> HttpResponse:
    now = timezone.now()
    filters = selectors.JobFilters.of(request.GET)
    page = _page_number(request)
    jobs, has_next = selectors.job_page(scope=request.tenant_scope, filters=filters, page=page)
    rows = [(job, selectors.next_fires(job=job, now=now, count=2)) for job in jobs]
    return _page(
        request,
        "dashboard/job_list.html",
        {
            "section": "jobs",
            "rows": rows,
            "filters": filters,
            "job_states": JobState.values,
            "job_types": JobType.values,
            "pools": registry.pools(),
            "handlers": registry.handler_names(),
            "pager": _pager(request, page, has_next),
            "here": request.get_full_path(),
        },
    )


def _form_context(request: ScopedRequest, form: forms.JobForm, **extra) -> dict:
    return {
        "section": "jobs",
        "form": form,
        "values": form.values,
        "errors": form.errors,
        "job_types": JobType.values,
        "handlers": forms.handler_options(form.values.get("handler", "")),
        "pools": registry.pools(),
        "backoffs": BackoffChoice.values,
        "priorities": Priority.names,
        "misfire_policies": MisfirePolicy.values,
        "concurrency_policies": ConcurrencyPolicy.values,
        "timezones": sorted(zoneinfo.available_timezones()),
        **extra,
    }


@require_http_methods(["GET", "POST"])
@operator_view
def job_create(request: ScopedRequest) -> HttpResponse:
    actor = Actor.of(request)
    tenants = selectors.tenants_in_scope(scope=request.tenant_scope)
    if request.method == "GET":
        form = forms.JobForm(values=forms.initial_values(tenant_slug=tenants[0].slug if len(tenants) == 1 else ""))
        form.values["runAt"] = (timezone.now() + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return _page(request, "dashboard/job_form.html", _form_context(request, form, creating=True))
    form = forms.bind_create(request.POST)
    tenant = tenant_for_create(scope=request.tenant_scope, slug=form.values.get("tenant", ""))
    if tenant is None and "tenant" not in form.errors:
        form.errors["tenant"] = ["choose a tenant you belong to"]
    now = db_now()
    if form.errors:
        services.audit_invalid(
            actor=actor,
            action="job.create",
            target=Target(type="job", label=form.values.get("name", ""), tenant_id=tenant.pk if tenant else None),
            errors=form.error_summary(),
            now=now,
        )
        return _page(request, "dashboard/job_form.html", _form_context(request, form, creating=True))
    # Valid: the form has its serializer, and the tenant was found (else an error above).
    assert tenant is not None and form.serializer is not None
    try:
        job = services.job_create_audited(actor=actor, tenant=tenant, fields=form.serializer.to_model_fields(), now=now)
    except ActionRefused as exc:
        form.errors["general"] = [str(exc)]
        return _page(request, "dashboard/job_form.html", _form_context(request, form, creating=True))
    messages.success(request, f"Job “{job.name}” created.")
    return HttpResponseRedirect(reverse("dashboard:job-detail", args=[job.pk]))


@require_GET
@operator_view
def job_detail(request: ScopedRequest, job_id: uuid.UUID) -> HttpResponse:
    job = _job_or_404(request, job_id)
    now = timezone.now()
    page = _page_number(request)
    executions, has_next = selectors.job_executions_page(scope=request.tenant_scope, job=job, page=page)
    _with_pending_reasons(executions)
    # A workflow job's runs are paged apart from its executions (?runs=n), on the same page.
    runs_page = _page_number(request, "runs")
    job_runs, runs_next = (
        runs.job_runs_page(scope=request.tenant_scope, job=job, page=runs_page) if job.workflow else ([], False)
    )
    return _page(
        request,
        "dashboard/job_detail.html",
        {
            "section": "jobs",
            "job": job,
            "fires": selectors.next_fires(job=job, now=now, count=10),
            "resume_question": selectors.resume_question(job=job, now=now) if job.state == JobState.PAUSED else None,
            "executions": executions,
            "pager": _pager(request, page, has_next),
            "runs": job_runs,
            "runs_pager": _pager(request, runs_page, runs_next, key="runs"),
            "workflow_steps": runs.workflow_steps(job),
            "audit": selectors.audit_for_job(scope=request.tenant_scope, job=job),
            "cancellable": CANCELLABLE,
            "redrivable": REDRIVABLE,
            "here": request.get_full_path(),
            **_versions_context(request, job),
        },
    )


VERSIONS_SHOWN = 20


def _versions_context(request: ScopedRequest, job) -> dict:
    """The job's latest versions, and the one chosen with `?version=n` (else the latest): what
    it changed, and what restoring it would change now."""
    shown = list(version_list(job=job)[: VERSIONS_SHOWN + 1])
    latest = shown[0] if shown else None
    chosen = latest
    raw = request.GET.get("version", "")
    if raw.isdigit() and latest is not None and int(raw) != latest.number:
        chosen = version_get(job=job, number=int(raw)) or latest
    restore_changes = []
    if chosen is not None and latest is not None and chosen.number != latest.number:
        restore_changes = changes_between(latest.definition, chosen.definition)
    return {
        "versions": shown[:VERSIONS_SHOWN],
        "versions_more": len(shown) > VERSIONS_SHOWN,
        "version_chosen": chosen,
        "version_latest": latest,
        "restore_changes": restore_changes,
        "can_restore": bool(restore_changes) and job.state not in JOB_TERMINAL,
    }


@require_http_methods(["GET", "POST"])
@operator_view
def job_edit(request: ScopedRequest, job_id: uuid.UUID) -> HttpResponse:
    job = _job_or_404(request, job_id)
    if request.method == "GET":
        form = forms.JobForm(values=forms.initial_values(job))
        return _page(request, "dashboard/job_form.html", _form_context(request, form, job=job, creating=False))
    actor = Actor.of(request)
    form = forms.bind_update(request.POST, job=job)
    now = db_now()
    if form.errors:
        if form.errors.get("general") != ["nothing changed"]:
            services.audit_invalid(
                actor=actor, action="job.update", target=Target.of_job(job), errors=form.error_summary(), now=now
            )
        return _page(request, "dashboard/job_form.html", _form_context(request, form, job=job, creating=False))
    assert form.serializer is not None  # valid: the form has its serializer
    fields = form.serializer.to_model_fields()
    fields.pop("type", None)
    try:
        services.job_update_audited(actor=actor, job=job, fields=fields, now=now)
    except ActionRefused as exc:
        form.errors["general"] = [str(exc)]
        return _page(request, "dashboard/job_form.html", _form_context(request, form, job=job, creating=False))
    messages.success(request, f"Job “{job.name}” updated.")
    return HttpResponseRedirect(reverse("dashboard:job-detail", args=[job.pk]))


@require_POST
@operator_view
def job_action(request: ScopedRequest, job_id: uuid.UUID, action: str) -> HttpResponse:
    if action not in services.JOB_ACTIONS:
        raise Http404("no such action")
    actor = Actor.of(request)
    job = job_get(scope=request.tenant_scope, job_id=job_id)
    if job is None:
        services.audit_not_found(
            actor=actor, action=f"job.{action}", target_type="job", target_id=str(job_id), now=db_now()
        )
        raise Http404("no such job")
    try:
        outcome = services.job_act(actor=actor, job=job, action=action, now=db_now())
        messages.success(request, f"“{job.name}”: {outcome}.")
    except ActionRefused as exc:
        messages.error(request, f"“{job.name}”: {action} refused — {exc}.")
    return _redirect_back(request, reverse("dashboard:job-detail", args=[job.pk]))


@require_POST
@operator_view
def job_version_restore(request: ScopedRequest, job_id: uuid.UUID, number: int) -> HttpResponse:
    """Make version `number` current again (the API's restore, audited as job.restore)."""
    actor = Actor.of(request)
    job = job_get(scope=request.tenant_scope, job_id=job_id)
    if job is None:
        services.audit_not_found(
            actor=actor, action="job.restore", target_type="job", target_id=str(job_id), now=db_now()
        )
        raise Http404("no such job")
    version = version_get(job=job, number=number)
    if version is None:
        raise Http404("no such version")
    try:
        services.job_version_restore_audited(actor=actor, job=job, version=version, now=db_now())
        messages.success(request, f"“{job.name}”: version {number} restored.")
    except ActionRefused as exc:
        messages.error(request, f"“{job.name}”: restore of version {number} refused — {exc}.")
    return HttpResponseRedirect(reverse("dashboard:job-detail", args=[job.pk]) + "#job-versions")


@require_POST
@operator_view
def jobs_bulk_action(request: ScopedRequest) -> HttpResponse:
    """Pause, resume or cancel the jobs selected on the jobs page; only the caller's tenants' jobs."""
    action = request.POST.get("action", "")
    if action not in services.BULK_JOB_ACTIONS:
        return HttpResponseBadRequest("unknown action", content_type="text/plain; charset=utf-8")
    actor = Actor.of(request)
    wanted = []
    for raw in request.POST.getlist("ids")[:MAX_BULK]:
        try:
            wanted.append(uuid.UUID(raw))
        except ValueError:
            continue
    found = jobs_in_scope(scope=request.tenant_scope).in_bulk(wanted)
    now = db_now()
    for missing in set(wanted) - set(found):
        services.audit_not_found(
            actor=actor, action=f"job.{action}", target_type="job", target_id=str(missing), now=now
        )
    if not wanted:
        messages.warning(request, "Nothing selected.")
    else:
        result = services.jobs_act_audited(actor=actor, jobs=list(found.values()), action=action, now=now)
        done = {"pause": "Paused", "resume": "Resumed", "cancel": "Cancelled"}[action]
        text = f"{done} {len(result.done)} job(s); skipped {len(result.skipped)} not in a state to {action}."
        (messages.success if result.done else messages.warning)(request, text)
        if len(found) < len(wanted):
            messages.error(request, f"{len(wanted) - len(found)} job(s) not found.")
    return _redirect_back(request, reverse("dashboard:jobs"))


# --- Executions ----------------------------------------------------------------------------------


def _execution_filters(request: ScopedRequest) -> executions_page.ExecutionFilters:
    state = request.GET.get("state", "")
    return executions_page.ExecutionFilters(
        state=state if state in S.values else "",
        pool=request.GET.get("pool", ""),
        tenant=request.GET.get("tenant", ""),
        job=request.GET.get("job", ""),
        since=_parse_when(request.GET.get("since", "")),
        until=_parse_when(request.GET.get("until", "")),
        q=request.GET.get("q", "").strip()[:200],
        after=executions_page.parse_cursor(request.GET.get("after", "")),
    )


@require_GET
@operator_view
def execution_list_view(request: ScopedRequest) -> HttpResponse:
    filters = _execution_filters(request)
    page = _page_number(request)
    result = executions_page.execution_page(scope=request.tenant_scope, filters=filters, page=page, now=timezone.now())
    _with_pending_reasons(result.rows)
    dead_letter = filters.state == S.DEAD
    return _page(
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
            "pager": _pager(request, page, result.has_next, after=result.next_after),
            "cancellable": CANCELLABLE,
            "redrivable": REDRIVABLE,
            "here": request.get_full_path(),
        },
    )


def _with_pending_reasons(executions) -> None:
    """Each execution of a page with its reason to wait (`pending_reason`, None unless it waits),
    read for the page at once."""
    reasons = pending_reasons(list(executions), now=db_now())
    for execution in executions:
        execution.pending_reason = reasons.get(execution.pk)


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
    return _page(
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
            state = services.execution_cancel_audited(actor=actor, execution=execution, now=db_now())
            messages.success(
                request, "Cancelled." if state == S.CANCELLED else "Cancel requested; the worker stops it shortly."
            )
        else:
            redriven = services.execution_retry_audited(actor=actor, execution=execution, now=db_now())
            messages.success(request, f"Re-driven: attempt {redriven.attempt} is pending.")
    except ActionRefused as exc:
        messages.error(request, f"{action.capitalize()} refused — {exc}.")
    return _redirect_back(request, reverse("dashboard:execution-detail", args=[execution.pk]))


MAX_BULK = 500


@require_POST
@operator_view
def executions_retry(request: ScopedRequest) -> HttpResponse:
    """Re-drive the selected executions (the dead-letter view's "Retry selected")."""
    actor = Actor.of(request)
    wanted = []
    for raw in request.POST.getlist("ids")[:MAX_BULK]:
        try:
            wanted.append(uuid.UUID(raw))
        except ValueError:
            continue
    found = execution_list(scope=request.tenant_scope).select_related("job").in_bulk(wanted)
    now = db_now()
    for missing in set(wanted) - set(found):
        services.audit_not_found(
            actor=actor, action="execution.retry", target_type="execution", target_id=str(missing), now=now
        )
    if not wanted:
        messages.warning(request, "Nothing selected.")
    else:
        result = services.executions_retry_audited(actor=actor, executions=list(found.values()), now=now)
        if result.done:
            messages.success(request, f"Re-driven {len(result.done)} execution(s).")
        for execution, reason in result.refused:
            messages.error(request, f"{execution.pk}: {reason}")
        if len(found) < len(wanted):
            messages.error(request, f"{len(wanted) - len(found)} execution(s) not found.")
    return _redirect_back(request, reverse("dashboard:executions") + "?state=DEAD")


# --- Audit ----------------------------------------------------------------------------------------


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
    page = _page_number(request)
    entries, has_next = selectors.audit_page(scope=request.tenant_scope, filters=filters, page=page)
    return _page(
        request,
        "dashboard/audit.html",
        {
            "section": "audit",
            "entries": entries,
            "filters": filters,
            "outcomes": AuditOutcome.values,
            "actions": ACTIONS,
            "kinds": ActorKind.choices,
            "pager": _pager(request, page, has_next),
        },
    )


# --- Static files -----------------------------------------------------------------------------------


def static_asset(request: HttpRequest, path: str) -> HttpResponseBase:
    """Static files straight from the apps' static folders, for installs with no web server in
    front of the ASGI server (the standalone mode). A proxy or CDN in front serves them instead."""
    from django.contrib.staticfiles.views import serve

    response = serve(request, path, insecure=True)
    response.headers["Cache-Control"] = "public, max-age=300"
    return response
