"""Events in the admin: read only. An event is a record of what was received and what it started;
it is never edited, and a new one is posted through the API."""

from django.contrib import admin

from events.models import Event

FIELDS = (
    "id",
    "tenant",
    "name",
    "source",
    "received_at",
    "payload",
    "matched",
    "execution_ids",
    "run_ids",
    "idempotency_key",
)


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["received_at", "tenant", "name", "source", "matched"]
    list_filter = ["source", "tenant"]
    search_fields = ["name", "=id"]
    ordering = ["-received_at"]
    fields = readonly_fields = FIELDS

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
