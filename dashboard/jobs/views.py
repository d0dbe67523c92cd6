"""The jobs pages: the list (filters, next fires, the bulk pause, resume and cancel), a job with
its next fires, executions, workflow runs, audit and versions (versions.py), and the actions on
one job (pause, resume, cancel, trigger; restore a version). Creating and editing: editing.py;
starting and cancelling a backfill: backfills.py."""

import uuid

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import selectors, services
from dashboard.executions.rows import CANCELLABLE, REDRIVABLE, with_pending_reasons
from dashboard.frame import (
    ScopedRequest,
    operator_view,
    page_number,
    pager,
    redirect_back,
    render_page,
    selected_ids,
)
from dashboard.jobs import actions
from dashboard.jobs.backfills import backfill_form_context
from dashboard.jobs.versions import versions_panel
from dashboard.runs import reads as runs
from dashboard.services import ActionRefused, Actor
from executions.clock import db_now
from jobs import registry
from jobs.models import Job, JobType
from jobs.selectors import job_get
from jobs.selectors import job_list as jobs_in_scope
from jobs.states import JobState
from jobs.versions import version_get
from pools import rate_limits
from readmodels.backfills import backfill_counts, backfill_list


def job_or_404(request: ScopedRequest, job_id: uuid.UUID) -> Job:
    job = job_get(scope=request.tenant_scope, job_id=job_id)
    if job is None:
        raise Http404("no such job")
    return job


@require_GET
@operator_view
def job_list(request: ScopedRequest) -> HttpResponse:
    now = timezone.now()
    filters = selectors.JobFilters.of(request.GET)
    page = page_number(request)
    jobs, has_next = selectors.job_page(scope=request.tenant_scope, filters=filters, page=page)
    rows = [(job, selectors.next_fires(job=job, now=now, count=2)) for job in jobs]
    return render_page(
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
            "pager": pager(request, page, has_next),
            "here": request.get_full_path(),
        },
    )


@require_GET
@operator_view
def job_detail(request: ScopedRequest, job_id: uuid.UUID) -> HttpResponse:
    job = job_or_404(request, job_id)
    now = timezone.now()
    page = page_number(request)
    executions, has_next = selectors.job_executions_page(scope=request.tenant_scope, job=job, page=page)
    with_pending_reasons(executions)
    # A workflow job's runs are paged apart from its executions (?runs=n), on the same page.
    runs_page = page_number(request, "runs")
    job_runs, runs_next = (
        runs.job_runs_page(scope=request.tenant_scope, job=job, page=runs_page) if job.workflow else ([], False)
    )
    return render_page(
        request,
        "dashboard/job_detail.html",
        {
            "section": "jobs",
            "job": job,
            "fires": selectors.next_fires(job=job, now=now, count=10),
            "resume_question": selectors.resume_question(job=job, now=now) if job.state == JobState.PAUSED else None,
            "executions": executions,
            "pager": pager(request, page, has_next),
            "runs": job_runs,
            "runs_pager": pager(request, runs_page, runs_next, key="runs"),
            "workflow_steps": runs.workflow_steps(job),
            "rate_limit": _rate_limit(job),
            "backfills": _backfills(request, job),
            **backfill_form_context(job, now),
            "audit": selectors.audit_for_job(scope=request.tenant_scope, job=job),
            "cancellable": CANCELLABLE,
            "redrivable": REDRIVABLE,
            "here": request.get_full_path(),
            **versions_panel(job=job, chosen_number=request.GET.get("version", "")),
        },
    )


def _rate_limit(job: Job) -> str:
    """The rate limit the job's runs are held to, as its page says it: the target's with its rate,
    else the one its handler declares, else "none"."""
    held_to = rate_limits.name_of(job.rate_limit, job.handler)
    if not held_to:
        return "none"
    limit = rate_limits.read().get(held_to)
    if job.rate_limit:
        return limit.describe() if limit else f"{held_to} (not defined: its runs are not limited)"
    rate = f", {limit.per_second:g}/s, burst {limit.burst}" if limit else ", not defined: not limited"
    return f"— (the handler's: {held_to}{rate})"


def _backfills(request: ScopedRequest, job: Job) -> list[dict]:
    """The job's latest backfills with their progress (its Backfill form or POST /v1/jobs/{id}/backfill
    makes them)."""
    if not job.is_recurring:
        return []
    latest = backfill_list(scope=request.tenant_scope).filter(job=job)[:BACKFILLS_SHOWN]
    shown = []
    for backfill in latest:
        counts = backfill_counts(backfill)
        ended = counts["SUCCEEDED"] + counts["DEAD"] + counts["CANCELLED"] + counts["DISCARDED"]
        shown.append({"backfill": backfill, "counts": counts, "ended": ended})
    return shown


BACKFILLS_SHOWN = 5


@require_POST
@operator_view
def job_action(request: ScopedRequest, job_id: uuid.UUID, action: str) -> HttpResponse:
    if action not in actions.JOB_ACTIONS:
        raise Http404("no such action")
    actor = Actor.of(request)
    job = job_get(scope=request.tenant_scope, job_id=job_id)
    if job is None:
        services.audit_not_found(
            actor=actor, action=f"job.{action}", target_type="job", target_id=str(job_id), now=db_now()
        )
        raise Http404("no such job")
    try:
        outcome = actions.job_act(actor=actor, job=job, action=action, now=db_now())
        messages.success(request, f"“{job.name}”: {outcome}.")
    except ActionRefused as exc:
        messages.error(request, f"“{job.name}”: {action} refused — {exc}.")
    return redirect_back(request, reverse("dashboard:job-detail", args=[job.pk]))


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
        actions.job_version_restore_audited(actor=actor, job=job, version=version, now=db_now())
        messages.success(request, f"“{job.name}”: version {number} restored.")
    except ActionRefused as exc:
        messages.error(request, f"“{job.name}”: restore of version {number} refused — {exc}.")
    return HttpResponseRedirect(reverse("dashboard:job-detail", args=[job.pk]) + "#job-versions")


@require_POST
@operator_view
def jobs_bulk_action(request: ScopedRequest) -> HttpResponse:
    """Pause, resume or cancel the jobs selected on the jobs page; only the caller's tenants' jobs."""
    action = request.POST.get("action", "")
    if action not in actions.BULK_JOB_ACTIONS:
        return HttpResponseBadRequest("unknown action", content_type="text/plain; charset=utf-8")
    actor = Actor.of(request)
    wanted = selected_ids(request)
    found = jobs_in_scope(scope=request.tenant_scope).in_bulk(wanted)
    now = db_now()
    for missing in set(wanted) - set(found):
        services.audit_not_found(
            actor=actor, action=f"job.{action}", target_type="job", target_id=str(missing), now=now
        )
    if not wanted:
        messages.warning(request, "Nothing selected.")
    else:
        result = actions.jobs_act_audited(actor=actor, jobs=list(found.values()), action=action, now=now)
        done = {"pause": "Paused", "resume": "Resumed", "cancel": "Cancelled"}[action]
        text = f"{done} {len(result.done)} job(s); skipped {len(result.skipped)} not in a state to {action}."
        (messages.success if result.done else messages.warning)(request, text)
        if len(found) < len(wanted):
            messages.error(request, f"{len(wanted) - len(found)} job(s) not found.")
    return redirect_back(request, reverse("dashboard:jobs"))
