from django.contrib import admin, messages

from jobs.models import Job
from jobs.services import job_cancel, job_pause, job_resume, job_trigger
from jobs.states import InvalidJobTransition
from scheduler_project.clock import db_now


def _run_action(modeladmin, request, queryset, service, verb: str) -> None:
    done, refused = 0, []
    for job in queryset:
        try:
            service(job=job, now=db_now())
            done += 1
        except InvalidJobTransition as exc:
            refused.append(str(exc))
    if done:
        modeladmin.message_user(request, f"{verb} {done} job(s)")
    for reason in refused:
        modeladmin.message_user(request, reason, messages.WARNING)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "type", "schedule", "timezone", "handler", "pool", "state", "next_fire_at"]
    list_filter = ["state", "type", "pool", "tenant"]
    search_fields = ["name", "id", "handler"]
    readonly_fields = [
        "id",
        "state",
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
