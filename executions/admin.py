from django.contrib import admin, messages

from executions.models import Execution, ExecutionEvent
from executions.services import execution_cancel, execution_redrive
from executions.states import InvalidTransition
from scheduler_project.clock import db_now


class EventInline(admin.TabularInline):
    model = ExecutionEvent
    extra = 0
    max_num = 0
    can_delete = False
    fields = ["at", "from_state", "to_state", "attempt", "worker_id", "message"]
    readonly_fields = fields


@admin.register(Execution)
class ExecutionAdmin(admin.ModelAdmin):
    list_display = ["id", "job", "tenant", "pool", "attempt", "state", "scheduled_for", "started_at", "finished_at"]
    list_filter = ["state", "pool", "origin", "tenant"]
    search_fields = ["id", "job__name", "job__id"]
    list_select_related = ["job", "tenant"]
    inlines = [EventInline]
    actions = ["cancel", "retry"]
    show_full_result_count = False  # COUNT(*) over millions of rows on every page is not worth it

    def get_readonly_fields(self, request, obj=None):
        # State changes only through the state machine (the actions); nothing here is editable.
        return [field.name for field in Execution._meta.fields]

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
            lambda e: execution_cancel(execution=e, now=db_now(), reason=f"cancelled by {request.user} (admin)"),
        )

    @admin.action(description="Retry (re-drive)", permissions=["operate"])
    def retry(self, request, queryset):
        self._act(
            request,
            queryset,
            lambda e: execution_redrive(execution=e, now=db_now(), reason=f"re-driven by {request.user} (admin)"),
        )

    def _act(self, request, queryset, action) -> None:
        done = 0
        for execution in queryset:
            try:
                action(execution)
                done += 1
            except InvalidTransition as exc:
                self.message_user(request, f"{execution.id}: {exc}", messages.WARNING)
        if done:
            self.message_user(request, f"{done} execution(s) updated")
