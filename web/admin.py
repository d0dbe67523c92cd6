"""The admin: tenants, jobs and executions. Its actions call the same services as the API.

Every change made here is in the audit log as well as in Django's own LogEntry (which only the
admin shows): the saves and deletions through `Audited`'s log_* hooks, which the admin calls in the
change's own transaction, and the actions through audit.services.audited, one row per object."""

import functools
from typing import Any

import django.contrib.auth.admin  # registers User and Group, re-registered below with the audit
from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from audit.models import ActorKind, AuditOutcome
from audit.services import Actor, Target, audit_record, audit_records, audited, client_ip, entry
from executions import history as execution_history
from executions import tallies
from executions.clock import db_now
from executions.models import Execution, ExecutionEvent
from executions.states import InvalidTransition
from jobs.models import Job
from jobs.states import InvalidJobTransition
from pools import rate_limits
from pools.models import RateLimit, Worker
from scheduling.execution_changes import execution_cancel, execution_redrive
from scheduling.job_changes import job_cancel, job_pause, job_resume, job_trigger
from tenants.models import ApiToken, Tenant
from tenants.services import token_create


class FoldsExecutions:
    """For an admin whose deletions cascade to executions: what those executions counted is
    folded into the metrics' totals first, in the deletion's transaction (executions/tallies.py),
    so the counters at /metrics do not go down."""

    execution_filter = ""  # the lookup from an execution to the objects deleted ("tenant__in")

    def _executions(self, queryset):
        lookup = self.execution_filter or "pk__in"
        return Execution.objects.filter(**{lookup: queryset.values("pk")})

    def delete_model(self, request, obj):
        with transaction.atomic(), tallies.folding(self._executions(type(obj).objects.filter(pk=obj.pk))):
            super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request, queryset):
        with transaction.atomic(), tallies.folding(self._executions(queryset)):
            super().delete_queryset(request, queryset)  # type: ignore[misc]


def admin_actor(request) -> Actor:
    user = request.user
    return Actor(user_id=user.pk, username=user.get_username(), source_ip=client_ip(request), kind=ActorKind.ADMIN)


def _target(obj) -> Target:
    """An object the admin changed, by the name people know it by (a tenant's slug, a user's
    username; else its id): a tenant is its own tenant; anything else names its tenant."""
    model = type(obj)._meta.model_name
    tenant_id = obj.pk if isinstance(obj, Tenant) else getattr(obj, "tenant_id", None)
    job_id = obj.pk if isinstance(obj, Job) else getattr(obj, "job_id", None)
    if isinstance(obj, Tenant):
        name = obj.slug
    elif isinstance(obj, get_user_model()):
        name = obj.get_username()
    else:
        name = str(obj.pk)
    return Target(type=model, id=name, label=str(obj), job_id=job_id, tenant_id=tenant_id)


def _relations_changed(form) -> list[dict[str, Any]]:
    """Who was added to or removed from each many-to-many field of a saved form (a tenant's
    members, a user's groups and permissions), in the change message's terms: Django's own says
    only "Changed Members."."""
    changes: list[dict[str, Any]] = []
    for name in form.changed_data:
        field = form.fields[name]
        if not isinstance(field, forms.ModelMultipleChoiceField):
            continue
        before = {obj.pk: obj for obj in form.initial.get(name) or []}
        after = {obj.pk: obj for obj in form.cleaned_data.get(name) or []}
        noun = str(form.instance._meta.get_field(name).verbose_name).removesuffix("s")
        changes += [{"added": {"name": noun, "object": str(after[pk])}} for pk in after.keys() - before.keys()]
        changes += [{"deleted": {"name": noun, "object": str(before[pk])}} for pk in before.keys() - after.keys()]
    return changes


class Audited:
    """Mirrors the admin's own log (additions, changes, deletions) into the audit log."""

    def construct_change_message(self, request, form, formsets, add=False):
        return super().construct_change_message(request, form, formsets, add) + _relations_changed(form)  # type: ignore[misc]

    def log_addition(self, request, obj, message):
        logged = super().log_addition(request, obj, message)  # type: ignore[misc]
        self._audit(request, obj, "add", logged)
        return logged

    def log_change(self, request, obj, message):
        logged = super().log_change(request, obj, message)  # type: ignore[misc]
        self._audit(request, obj, "change", logged)
        return logged

    def log_deletions(self, request, queryset):
        logged = super().log_deletions(request, queryset)  # type: ignore[misc]
        actor, now = admin_actor(request), timezone.now()
        targets = [_target(obj) for obj in queryset]
        audit_records(
            entry(actor=actor, action=f"{target.type}.delete", target=target, outcome=AuditOutcome.OK, now=now)
            for target in targets
        )
        return logged

    def _audit(self, request, obj, verb: str, logged) -> None:
        target = _target(obj)
        detail = logged.get_change_message() if hasattr(logged, "get_change_message") else ""
        audit_record(
            actor=admin_actor(request),
            action=f"{target.type}.{verb}",
            target=target,
            outcome=AuditOutcome.OK,
            now=timezone.now(),
            detail=detail,
        )


def _issue_token(modeladmin, request, tenant: Tenant, name: str) -> ApiToken:
    """A new token of `tenant`, audited as `apitoken.add`, its key shown once in a message (only
    its hash is stored)."""
    token, raw = audited(
        actor=admin_actor(request),
        action="apitoken.add",
        target=_target(tenant),
        now=timezone.now(),
        run=functools.partial(token_create, tenant=tenant, name=name),
        describe=lambda made: f"token {made[0].name} ({made[0].key_prefix})",
        target_of=lambda made: _target(made[0]),
    )
    modeladmin.message_user(
        request, f"token for {tenant.slug}: {raw} (copy it now; it is not stored)", messages.WARNING
    )
    return token


class ApiTokenInline(admin.TabularInline):
    """A tenant's tokens: a new row is issued as `create_token` issues one (TenantAdmin.save_formset)."""

    model = ApiToken
    extra = 0
    fields = ["name", "key_prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["key_prefix", "created_at", "last_used_at"]


@admin.register(Tenant)
class TenantAdmin(Audited, FoldsExecutions, admin.ModelAdmin):
    execution_filter = "tenant__in"
    list_display = ["slug", "name", "weight", "max_concurrent_executions", "max_active_jobs", "submit_rate_per_minute"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["members"]
    exclude = ["signing_secret"]
    inlines = [ApiTokenInline]
    actions = ["issue_token"]

    # Minting a token grants the tenant's API access, so it takes the change permission, not view.
    @admin.action(description="Issue a new API token (shown once)", permissions=["change"])
    def issue_token(self, request, queryset):
        for tenant in queryset:
            _issue_token(self, request, tenant, f"admin:{request.user}")

    def save_formset(self, request, form, formset, change):
        if formset.model is not ApiToken:
            return super().save_formset(request, form, formset, change)
        # A row added in the inline form would be saved as it is, with no key: a token nobody can
        # use. It is issued instead, and its key shown once; the change message names it.
        tokens = formset.save(commit=False)
        for token in formset.deleted_objects:
            token.delete()
        for token in tokens:
            if token.pk is not None:
                token.save()
        formset.new_objects = [
            _issue_token(self, request, form.instance, token.name or f"admin:{request.user}")
            for token in formset.new_objects
        ]


@admin.register(ApiToken)
class ApiTokenAdmin(Audited, admin.ModelAdmin):
    list_display = ["key_prefix", "tenant", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant"]
    # A token stays with the tenant it was issued to; revoking is the one change that matters.
    readonly_fields = ["tenant", "key_prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request) -> bool:
        return False  # tokens are issued by the tenant action, which can show the raw value once


admin.site.unregister(get_user_model())
admin.site.unregister(Group)


@admin.register(get_user_model())
class UserAdmin(Audited, django.contrib.auth.admin.UserAdmin):
    """Django's, with its additions, changes (groups and permissions by name) and deletions in the
    audit log: who may act in the admin and the dashboard is what a security review reads first."""


@admin.register(Group)
class GroupAdmin(Audited, django.contrib.auth.admin.GroupAdmin):
    pass


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    """The worker registry, as the workers report themselves: read only."""

    list_display = ["hostname", "pid", "pools", "slots", "busy", "started_at", "last_seen_at", "stopped_at"]
    search_fields = ["hostname"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class RateLimitForm(forms.ModelForm):
    class Meta:
        model = RateLimit
        fields = ["name", "per_second", "burst"]
        help_texts = {
            "name": "Handlers declare it (register(..., rate_limit=NAME)); jobs name it in target.rateLimit.",
            "per_second": "Starts a second across every worker (e.g. 10, or 0.5).",
            "burst": "Starts at once after a quiet spell (1: evenly spaced).",
        }

    def clean(self) -> dict:
        data = super().clean() or {}
        if {"name", "per_second", "burst"} <= data.keys():  # each field parsed: the definition's own check
            for field, message in rate_limits.problems(**{k: data[k] for k in ("name", "per_second", "burst")}).items():
                self.add_error(field, message)
        return data


@admin.register(RateLimit)
class RateLimitAdmin(Audited, admin.ModelAdmin):
    """The named rate limits, as `manage.py rate_limit set` defines them (pools/rate_limits.py).
    Their clocks are the claim's and the workers' own: not shown, never edited."""

    form = RateLimitForm
    list_display = ["name", "per_second", "burst", "updated_at"]
    search_fields = ["name"]

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        rate_limits.definitions.forget()


def _run_action(modeladmin, request, queryset, service, verb: str) -> None:
    done, refused = 0, []
    actor = admin_actor(request)
    for job in queryset:
        now = db_now()
        try:
            audited(
                actor=actor,
                action=f"job.{service.__name__.removeprefix('job_')}",
                target=Target.of_job(job),
                now=now,
                run=functools.partial(service, job=job, now=now),
            )
            done += 1
        except InvalidJobTransition as exc:
            refused.append(str(exc))
    if done:
        modeladmin.message_user(request, f"{verb} {done} job(s)")
    for reason in refused:
        modeladmin.message_user(request, reason, messages.WARNING)


@admin.register(Job)
class JobAdmin(Audited, FoldsExecutions, admin.ModelAdmin):
    execution_filter = "job__in"
    list_display = ["name", "tenant", "type", "schedule", "timezone", "handler", "pool", "shown_state", "next_fire_at"]
    list_filter = ["state", "type", "pool", "tenant"]
    search_fields = ["name", "id", "handler"]
    readonly_fields = [
        "id",
        "shown_state",
        "next_fire_at",
        "idempotency_key",
        "request_fingerprint",
        "created_at",
        "updated_at",
    ]
    actions = ["pause", "resume", "cancel", "trigger"]
    list_select_related = ["tenant"]

    def has_add_permission(self, request) -> bool:
        return False  # jobs are created through the API, which validates and makes the first execution

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # definitions change through the API's update, which re-times the schedule

    def has_operate_permission(self, request) -> bool:
        # The actions change state, so they need more than the view permission this admin is
        # limited to; the model's "change" permission is what grants them.
        return request.user.has_perm("jobs.change_job")

    @admin.action(description="Pause", permissions=["operate"])
    def pause(self, request, queryset):
        _run_action(self, request, queryset, job_pause, "paused")

    @admin.action(description="Resume", permissions=["operate"])
    def resume(self, request, queryset):
        _run_action(self, request, queryset, job_resume, "resumed")

    @admin.action(description="Cancel (no future fires)", permissions=["operate"])
    def cancel(self, request, queryset):
        _run_action(self, request, queryset, job_cancel, "cancelled")

    @admin.action(description="Trigger (run now)", permissions=["operate"])
    def trigger(self, request, queryset):
        _run_action(self, request, queryset, job_trigger, "triggered")

    @admin.display(description="state")
    def shown_state(self, job: Job) -> str:
        # A one-off's COMPLETED is read from its executions (executions/standing.py); the filter
        # beside it is of the stored state.
        return job.standing


class EventInline(admin.TabularInline):
    """The history's rows. A history told by the execution's columns (store/history.py) has
    none: the page's "history" field shows it whole, either way."""

    model = ExecutionEvent
    extra = 0
    max_num = 0
    can_delete = False
    fields = readonly_fields = ("at", "from_state", "to_state", "attempt", "worker_id", "message")


@admin.register(Execution)
class ExecutionAdmin(Audited, FoldsExecutions, admin.ModelAdmin):
    list_display = ["id", "job", "tenant", "pool", "attempt", "state", "scheduled_for", "started_at", "finished_at"]
    list_filter = ["state", "pool", "origin", "tenant"]
    search_fields = ["id", "job__name", "job__id"]
    list_select_related = ["job", "tenant"]
    inlines = [EventInline]
    actions = ["cancel", "retry"]
    show_full_result_count = False  # COUNT(*) over millions of rows on every page is not worth it

    def get_readonly_fields(self, request, obj=None):
        # State changes only through the state machine (the actions); nothing here is editable.
        return [field.name for field in Execution._meta.fields] + ["history"]

    @admin.display(description="history")
    def history(self, obj: Execution) -> str:
        """Its events, oldest first, whether rows or told by its columns (executions/history.py)."""
        return format_html_join(
            mark_safe("<br>"),
            "{} {} → {} · attempt {} {} {}",
            (
                (e.at.isoformat(), e.from_state or "∅", e.to_state, e.attempt, e.worker_id, e.message)
                for e in execution_history.timeline(obj)
            ),
        )

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        # View only: saving the form would write the whole row back, `state` included, beside
        # the state machine (and over a worker's concurrent transition).
        return False

    def has_operate_permission(self, request) -> bool:
        return request.user.has_perm("executions.change_execution")

    @admin.action(description="Cancel", permissions=["operate"])
    def cancel(self, request, queryset):
        self._act(
            request,
            queryset,
            "execution.cancel",
            lambda e: execution_cancel(execution=e, now=db_now(), reason=f"cancelled by {request.user} (admin)"),
        )

    @admin.action(description="Retry (re-drive)", permissions=["operate"])
    def retry(self, request, queryset):
        self._act(
            request,
            queryset,
            "execution.retry",
            lambda e: execution_redrive(execution=e, now=db_now(), reason=f"re-driven by {request.user} (admin)"),
        )

    def _act(self, request, queryset, name: str, action) -> None:
        done = 0
        actor = admin_actor(request)
        for execution in queryset:
            try:
                audited(
                    actor=actor,
                    action=name,
                    target=Target.of_execution(execution),
                    now=timezone.now(),
                    run=functools.partial(action, execution),
                )
                done += 1
            except InvalidTransition as exc:
                self.message_user(request, f"{execution.id}: {exc}", messages.WARNING)
        if done:
            self.message_user(request, f"{done} execution(s) updated")
