import uuid

from django.db import models
from django.db.models import Q

# What an event's name may be: a dotted or namespaced word (`invoice.paid`, `billing:refund-issued`).
# It appears in a webhook's path, so it holds nothing a URL would have to escape.
EVENT_NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
EVENT_NAME_MAX_LENGTH = 200


class EventSource(models.TextChoices):
    API = "api"  # POST /v1/events, with a tenant's token
    WEBHOOK = "webhook"  # POST /v1/hooks/<tenant>/<event>, signed with the tenant's inbound secret


class Event(models.Model):
    """Something that happened in a tenant's world, as it was received, with what it started: a run
    of each ACTIVE event job of the tenant that it matched (events/services.py). Written once, in
    the transaction that started those runs, and never changed; the sweeper prunes it after the
    retention (events_prune)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: the (tenant, …) indexes below lead with it.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="events", db_index=False)
    name = models.CharField(max_length=EVENT_NAME_MAX_LENGTH)
    payload = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=8, choices=EventSource.choices)
    received_at = models.DateTimeField()
    # What it started, in the order it started them (the matching jobs by creation, a workflow's
    # executions in its order of steps). Kept on the row, so that a replay of its idempotency key
    # answers exactly what the first request did, and so that listing events reads no executions.
    matched = models.PositiveIntegerField(default=0)
    execution_ids = models.JSONField(default=list, blank=True)
    run_ids = models.JSONField(default=list, blank=True)
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    request_fingerprint = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-received_at"]
        constraints = [
            # Decides the race of two requests under one key: one insert wins, the other waits on
            # it and then fails, before it has started anything (events_receive).
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="event_idempotency_key_unique",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-received_at"], name="event_tenant_received"),
            models.Index(fields=["tenant", "name", "-received_at"], name="event_tenant_name"),
            # The sweeper's pruning, oldest first.
            models.Index(fields=["received_at"], name="event_received"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class DebouncedEvent(models.Model):
    """An event that a debounced EVENT job folded into one of its runs (events/debounce.py), the
    first of them included: the run's handler is told how many and which (its context's event).
    Written with its event, deleted with it."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="folds")
    # The run's execution (no foreign key: executions are pruned by their own retention).
    execution_id = models.UUIDField()

    class Meta:
        indexes = [models.Index(fields=["execution_id", "event"], name="debounced_event_execution")]

    def __str__(self) -> str:
        return f"{self.event_id} in {self.execution_id}"
