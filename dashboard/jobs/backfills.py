"""Backfilling a job from its page (docs/backfill.md): the form (from, to, order, reprocess, at
most N at once) is held to the API's own NewBackfillSerializer and answered first with the dry
run, scheduling.backfills.backfill_plan's, as POST /v1/jobs/{id}/backfill with dryRun answers it;
its "Start backfill" makes the backfill (audited backfill.create). A RUNNING backfill's row on the
job's page cancels it (audited backfill.cancel). Nothing here validates on its own beyond turning
the page's UTC times into ISO 8601: the rules and their messages are the API's and the service's.
"""

import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect, QueryDict
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from dashboard import services
from dashboard.frame import ScopedRequest, operator_view, redirect_back, render_page
from dashboard.jobs import actions
from dashboard.jobs.forms import flatten_errors
from dashboard.services import ActionRefused, Actor, Target
from executions.clock import db_now
from executions.models import Backfill, BackfillOrder, FireAction, Reprocess
from jobs.models import Job
from jobs.selectors import job_get
from jobs.states import JobState
from readmodels.backfills import backfill_counts, backfill_list
from scheduling import backfills
from web.api.backfills import NewBackfillSerializer

TEMPLATE = "dashboard/job_backfill.html"
FIELDS = ("from", "to", "order", "reprocess", "maxConcurrent")
# The dry run's fires shown on the page; the rest are counted ("and N more").
PLAN_SHOWN = 50
# The choices as the form offers them: what each does, in the words of docs/backfill.md.
ORDERS = {BackfillOrder.OLDEST_FIRST: "oldest first", BackfillOrder.NEWEST_FIRST: "newest first"}
REPROCESS = {
    Reprocess.NONE: "skip them (NONE)",
    Reprocess.FAILED: "run again if failed (FAILED)",
    Reprocess.ALL: "run them all again (ALL)",
}
# A datetime-local input's value: a wall time without an offset, which on these pages is UTC.
_WALL_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,6})?)?")


@dataclass
class BackfillForm:
    """What the page shows: the values as typed, errors per field (the API's names), and what
    the serializer made of them when it validated."""

    values: dict[str, str]
    errors: dict[str, list[str]] = field(default_factory=dict)
    asked: dict[str, Any] | None = None

    def error_summary(self) -> str:
        return "; ".join(f"{name}: {' '.join(lines)}" for name, lines in sorted(self.errors.items()))

    @property
    def other_errors(self) -> list[tuple[str, str]]:
        """Errors of what the form has no field for (the job's `type`): (its name, the message)."""
        named = sorted((name, lines) for name, lines in self.errors.items() if name not in (*FIELDS, "general"))
        return [(name, line) for name, lines in named for line in lines]


def _wall(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def initial_values(now: datetime) -> dict[str, str]:
    """The last 24 hours up to the current minute, oldest first, nothing re-run, one at a time
    (the API's defaults)."""
    to = now.replace(second=0, microsecond=0)
    return {
        "from": _wall(to - timedelta(days=1)),
        "to": _wall(to),
        "order": BackfillOrder.OLDEST_FIRST,
        "reprocess": Reprocess.NONE,
        "maxConcurrent": "1",
    }


def _iso(text: str) -> str:
    """The page's UTC wall time as ISO 8601 with its offset; anything else as typed, for the
    serializer to judge."""
    return f"{text}Z" if _WALL_TIME.fullmatch(text) else text


def bind(post: QueryDict, *, job: Job, now: datetime) -> tuple[BackfillForm, list[backfills.PlannedFire]]:
    """Validate as a POST /v1/jobs/{id}/backfill body, then plan (the dry run): what is wrong is
    an error on its field, with the API's message."""
    values = {name: post.get(name, "").strip() for name in FIELDS}
    data: dict[str, Any] = {name: value for name, value in values.items() if value != ""}
    for name in ("from", "to"):
        if name in data:
            data[name] = _iso(data[name])
    serializer = NewBackfillSerializer(data={**data, "dryRun": True})
    if not serializer.is_valid():
        return BackfillForm(values=values, errors=flatten_errors(serializer.errors)), []
    asked = dict(serializer.validated_data)
    try:
        plan = backfills.backfill_plan(
            job=job, start=asked["from"], end=asked["to"], order=asked["order"], reprocess=asked["reprocess"], now=now
        )
    except backfills.BackfillRefused as refusal:
        return BackfillForm(values=values, errors={refusal.field: [refusal.message]}), []
    return BackfillForm(values=values, asked=asked), plan


def plan_summary(plan: list[backfills.PlannedFire]) -> dict[str, Any]:
    """The dry run as the page shows it: how many fires do what, and the first PLAN_SHOWN."""
    actions_count = Counter(fire.action for fire in plan)
    return {
        "total": len(plan),
        "run": actions_count[FireAction.RUN],
        "rerun": actions_count[FireAction.RERUN],
        "skip": actions_count[FireAction.SKIP],
        "shown": plan[:PLAN_SHOWN],
        "more": max(len(plan) - PLAN_SHOWN, 0),
    }


def _context(job: Job, form: BackfillForm, **extra) -> dict[str, Any]:
    return {
        "section": "jobs",
        "job": job,
        "backfill_form": form,
        "orders": ORDERS,
        "reprocesses": REPROCESS,
        "max_concurrent": backfills.MAX_CONCURRENT,
        **extra,
    }


def backfill_form_context(job: Job, now: datetime) -> dict[str, Any]:
    """What the job's page needs for its Backfill form (only an ACTIVE or PAUSED recurring job's)."""
    if not job.is_recurring or job.state not in (JobState.ACTIVE, JobState.PAUSED):
        return {}
    return _context(job, BackfillForm(values=initial_values(now)))


@require_http_methods(["GET", "POST"])
@operator_view
def job_backfill(request: ScopedRequest, job_id: uuid.UUID) -> HttpResponse:
    """GET: the form. POST: its dry run with "Start backfill"; POST with `start`: the backfill."""
    actor = Actor.of(request)
    job = job_get(scope=request.tenant_scope, job_id=job_id)
    if job is None:
        if request.method == "POST":
            services.audit_not_found(
                actor=actor, action="backfill.create", target_type="job", target_id=str(job_id), now=db_now()
            )
        raise Http404("no such job")
    now = db_now()
    if request.method == "GET":
        return render_page(request, TEMPLATE, _context(job, BackfillForm(values=initial_values(now))))
    form, plan = bind(request.POST, job=job, now=now)
    if form.asked is None:
        services.audit_invalid(
            actor=actor, action="backfill.create", target=Target.of_job(job), errors=form.error_summary(), now=now
        )
        return render_page(request, TEMPLATE, _context(job, form))
    if "start" not in request.POST:
        return render_page(request, TEMPLATE, _context(job, form, plan=plan_summary(plan)))  # a dry run: no row
    try:
        backfill = actions.backfill_create_audited(actor=actor, job=job, asked=form.asked, now=now)
    except ActionRefused as exc:
        form.errors["general"] = [str(exc)]
        return render_page(request, TEMPLATE, _context(job, form))
    counts = backfill_counts(backfill)
    messages.success(
        request,
        f"“{job.name}”: backfill {str(backfill.pk)[:8]} started: {counts['fires']} fire(s) to run, "
        f"{counts['skipped']} skipped.",
    )
    return HttpResponseRedirect(reverse("dashboard:job-detail", args=[job.pk]) + "#job-backfills")


def _backfill_in_scope(request: ScopedRequest, backfill_id: uuid.UUID) -> Backfill | None:
    return backfill_list(scope=request.tenant_scope).filter(pk=backfill_id).select_related("job").first()


@require_POST
@operator_view
def backfill_cancel(request: ScopedRequest, backfill_id: uuid.UUID) -> HttpResponse:
    """Cancel a backfill of a job the caller may see (another tenant's: 404, audited NOT_FOUND)."""
    actor = Actor.of(request)
    backfill = _backfill_in_scope(request, backfill_id)
    if backfill is None:
        services.audit_not_found(
            actor=actor, action="backfill.cancel", target_type="backfill", target_id=str(backfill_id), now=db_now()
        )
        raise Http404("no such backfill")
    job = backfill.job
    short = str(backfill.pk)[:8]
    try:
        actions.backfill_cancel_audited(actor=actor, backfill=backfill, now=db_now())
        messages.success(
            request,
            f"“{job.name}”: backfill {short} cancelled; nothing more is released, its runs not started are cancelled.",
        )
    except ActionRefused as exc:
        messages.error(request, f"“{job.name}”: cancel of backfill {short} refused — {exc}.")
    return redirect_back(request, reverse("dashboard:job-detail", args=[job.pk]) + "#job-backfills")
