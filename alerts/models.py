"""Alert rules, the alerts they raise, and the notifications sent of them (docs/alerts.md).

An alert is one (rule, subject) breach: FIRING from the evaluation that first saw it until the
first that no longer does, then RESOLVED for good (a new breach is a new alert; alerts/states.py). Its notifications
are rows written in the transaction that fired or resolved it, one per channel and event, and
sent after (alerts/delivery.py): a crash between the two loses no notification, and no evaluation
waits on a slow webhook.
"""

import uuid

from django.db import models
from django.db.models import Q

from alerts.states import AlertState, NotificationState


class AlertKind(models.TextChoices):
    FAILURE_RATE = "FAILURE_RATE"  # runs ending DEAD / runs ending, over windowSec, above threshold %
    START_LAG_P99 = "START_LAG_P99"  # p99 of started_at - available_at over windowSec, above threshold ms
    DEAD_LETTER = "DEAD_LETTER"  # executions that went DEAD within windowSec, more than threshold
    NO_WORKERS = "NO_WORKERS"  # a pool with no live worker
    SCHEDULER_DOWN = "SCHEDULER_DOWN"  # no dispatcher (or no sweeper) seen for threshold s
    MISSED_FIRE = "MISSED_FIRE"  # a cron job's fire not started threshold s after it was due
    JOB_AUTO_PAUSED = "JOB_AUTO_PAUSED"  # a job the system paused after pauseAfterFailures failed fires


class AlertRule(models.Model):
    """What to watch and whom to tell. A rule of a tenant judges that tenant's executions and jobs
    (NO_WORKERS and SCHEDULER_DOWN are about the shared fleet, whoever asks); a global rule (no
    tenant, made by staff) judges all tenants'."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, null=True, blank=True, related_name="alert_rules"
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=AlertKind.choices)
    # Its unit is the kind's (alerts/kinds.py); null for NO_WORKERS, which has none.
    threshold = models.FloatField(null=True, blank=True)
    window_sec = models.PositiveIntegerField(default=300)
    pool = models.CharField(max_length=64, blank=True)
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, null=True, blank=True, related_name="alert_rules")
    # [{"type": "webhook", "url": …} | {"type": "email", "to": …}], 1 to 10, validated by the API.
    channels = models.JSONField(default=list)
    enabled = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.CheckConstraint(condition=Q(kind__in=AlertKind.values), name="alert_rule_kind_valid")]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="alert_rule_tenant_created")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def channel_targets(self) -> list[tuple[str, str]]:
        """Each channel as (type, where it goes): a webhook's URL, an email channel's address. The
        one place that knows which key holds the target of which type (the notifications written
        for it, the dashboard's list of rules)."""
        return [
            (channel["type"], channel["url"] if channel["type"] == "webhook" else channel["to"])
            for channel in self.channels
        ]


class Alert(models.Model):
    """One breach of a rule by one subject (a pool, a job, a role, or the rule's whole scope)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    # The rule's, copied so that scoping a list of alerts needs no join.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    subject = models.CharField(max_length=200)
    state = models.CharField(max_length=8, choices=AlertState.choices, default=AlertState.FIRING)
    fired_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    summary = models.TextField()  # what was seen when it fired
    resolved_summary = models.TextField(blank=True)  # and when it resolved

    class Meta:
        ordering = ["-fired_at"]
        constraints = [
            # Fires once: two evaluators that both see a new breach both insert, and one of them
            # fails here, inside the transaction that would also have written its notifications.
            models.UniqueConstraint(fields=["rule", "subject"], condition=Q(state="FIRING"), name="alert_one_firing"),
            models.CheckConstraint(condition=Q(state__in=AlertState.values), name="alert_state_valid"),
            models.CheckConstraint(
                condition=Q(state="FIRING", resolved_at__isnull=True) | Q(state="RESOLVED", resolved_at__isnull=False),
                name="alert_resolved_has_time",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-fired_at"], name="alert_tenant_fired"),
            models.Index(fields=["-fired_at"], name="alert_fired"),
            # Every dashboard page's banner reads it.
            models.Index(fields=["fired_at"], condition=Q(state="FIRING"), name="alert_firing"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.subject} {self.state}"


class NotificationEvent(models.TextChoices):
    FIRED = "FIRED"
    RESOLVED = "RESOLVED"


class Notification(models.Model):
    """One message about one alert's firing or resolving, to one channel."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=8, choices=NotificationEvent.choices)
    channel_type = models.CharField(max_length=8)  # "webhook" or "email"
    target = models.CharField(max_length=2000)  # the URL or the address
    state = models.CharField(max_length=8, choices=NotificationState.choices, default=NotificationState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_error = models.TextField(blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # Notifies once per event and channel, however many evaluators saw it.
            models.UniqueConstraint(
                fields=["alert", "event", "channel_type", "target"], name="notification_once_per_channel"
            ),
        ]
        indexes = [
            models.Index(fields=["next_attempt_at"], condition=Q(state="PENDING"), name="notification_due"),
        ]

    def __str__(self) -> str:
        return f"{self.alert_id} {self.event} {self.channel_type}:{self.target} {self.state}"
