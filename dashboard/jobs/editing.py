"""Creating and editing a job from the dashboard: the job form (dashboard/jobs/forms.py, held to
the API's own serializer) in, an audited create or update (dashboard/jobs/actions.py) out. An invalid
form is audited too, as what was attempted, except an edit that changed nothing."""

import uuid
import zoneinfo
from datetime import timedelta

from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from dashboard import selectors, services
from dashboard.frame import ScopedRequest, operator_view, render_page
from dashboard.jobs import actions, forms
from dashboard.jobs.views import job_or_404
from dashboard.services import ActionRefused, Actor, Target
from executions.clock import db_now
from jobs import registry
from jobs.models import Backoff, ConcurrencyPolicy, JobType, MisfirePolicy, Priority
from tenants.selectors import tenant_for_create

TEMPLATE = "dashboard/job_form.html"


def _form_context(form: forms.JobForm, **extra) -> dict:
    return {
        "section": "jobs",
        "form": form,
        "values": form.values,
        "errors": form.errors,
        "job_types": JobType.values,
        "handlers": forms.handler_options(form.values.get("handler", "")),
        "pools": registry.pools(),
        "rate_limits": forms.rate_limit_options(form.values.get("rateLimit", "")),
        "backoffs": Backoff.values,
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
        return render_page(request, TEMPLATE, _form_context(form, creating=True))
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
        return render_page(request, TEMPLATE, _form_context(form, creating=True))
    # Valid: the form has its serializer, and the tenant was found (else an error above).
    assert tenant is not None and form.serializer is not None
    try:
        job = actions.job_create_audited(actor=actor, tenant=tenant, fields=form.serializer.to_model_fields(), now=now)
    except ActionRefused as exc:
        form.errors["general"] = [str(exc)]
        return render_page(request, TEMPLATE, _form_context(form, creating=True))
    messages.success(request, f"Job “{job.name}” created.")
    return HttpResponseRedirect(reverse("dashboard:job-detail", args=[job.pk]))


@require_http_methods(["GET", "POST"])
@operator_view
def job_edit(request: ScopedRequest, job_id: uuid.UUID) -> HttpResponse:
    job = job_or_404(request, job_id)
    if request.method == "GET":
        form = forms.JobForm(values=forms.initial_values(job))
        return render_page(request, TEMPLATE, _form_context(form, job=job, creating=False))
    actor = Actor.of(request)
    form = forms.bind_update(request.POST, job=job)
    now = db_now()
    if form.errors:
        if form.errors.get("general") != ["nothing changed"]:
            services.audit_invalid(
                actor=actor, action="job.update", target=Target.of_job(job), errors=form.error_summary(), now=now
            )
        return render_page(request, TEMPLATE, _form_context(form, job=job, creating=False))
    assert form.serializer is not None  # valid: the form has its serializer
    fields = form.serializer.to_model_fields()
    fields.pop("type", None)
    try:
        actions.job_update_audited(actor=actor, job=job, fields=fields, now=now)
    except ActionRefused as exc:
        form.errors["general"] = [str(exc)]
        return render_page(request, TEMPLATE, _form_context(form, job=job, creating=False))
    messages.success(request, f"Job “{job.name}” updated.")
    return HttpResponseRedirect(reverse("dashboard:job-detail", args=[job.pk]))
