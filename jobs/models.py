import uuid

from django.db import models
from django.db.models import Q

from jobs.states import JobState


class JobType(models.TextChoices):
    ONCE = "ONCE"
    DELAYED = "DELAYED"
    CRON = "CRON"


class Priority(models.IntegerChoices):
    # Stored as a number so the claim can ORDER BY it; lower runs first.
    HIGH = 0, "HIGH"
    NORMAL = 1, "NORMAL"
    LOW = 2, "LOW"


class Backoff(models.TextChoices):
    EXPONENTIAL = "EXPONENTIAL"
    FIXED = "FIXED"


class MisfirePolicy(models.TextChoices):
    RUN_ONCE = "RUN_ONCE"  # one catch-up run for all fires missed while nothing dispatched
    RUN_ALL = "RUN_ALL"  # one run per missed fire (a backfill)
    SKIP = "SKIP"  # missed fires are dropped; the next future fire runs


class ConcurrencyPolicy(models.TextChoices):
    ALLOW = "ALLOW"
    FORBID = "FORBID"  # a fire is skipped while an earlier run of the job is still active
    REPLACE = "REPLACE"  # an active run is cancelled and the new fire runs


class Job(models.Model):
    """What to run, when, and how to retry it. Each run is an Execution."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: the (tenant, …) indexes below lead with it. Every job write pays per index.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="jobs", db_index=False)
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=8, choices=JobType.choices)
    # ONCE: the requested instant; DELAYED: creation time + delay_sec. Null for CRON.
    run_at = models.DateTimeField(null=True, blank=True)
    delay_sec = models.PositiveIntegerField(null=True, blank=True)
    schedule = models.CharField(max_length=200, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    pool = models.CharField(max_length=64)
    handler = models.CharField(max_length=100)
    payload = models.JSONField(default=dict, blank=True)
    max_attempts = models.PositiveIntegerField(default=3)
    backoff = models.CharField(max_length=12, choices=Backoff.choices, default=Backoff.EXPONENTIAL)
    initial_delay_ms = models.PositiveIntegerField(default=1000)
    max_delay_ms = models.PositiveIntegerField(default=60_000)
    jitter = models.BooleanField(default=True)
    timeout_sec = models.PositiveIntegerField(default=3600)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    misfire_policy = models.CharField(max_length=8, choices=MisfirePolicy.choices, default=MisfirePolicy.RUN_ONCE)
    concurrency_policy = models.CharField(
        max_length=8, choices=ConcurrencyPolicy.choices, default=ConcurrencyPolicy.ALLOW
    )
    state = models.CharField(max_length=10, choices=JobState.choices, default=JobState.ACTIVE)
    # The earliest scheduled fire not yet dispatched; null when there is none.
    next_fire_at = models.DateTimeField(null=True, blank=True)
    # Null, not "", when absent: the unique index must ignore jobs created without a key.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # SHA-256 of the canonical request body, to tell a replay from a conflicting reuse of the key.
    request_fingerprint = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="job_idempotency_key_unique",
            ),
            models.CheckConstraint(
                condition=~Q(type__in=["ONCE", "DELAYED"]) | Q(run_at__isnull=False),
                name="job_one_off_has_run_at",
            ),
            models.CheckConstraint(
                condition=~Q(type="DELAYED") | Q(delay_sec__isnull=False), name="job_delayed_has_delay"
            ),
            models.CheckConstraint(condition=~Q(type="CRON") | ~Q(schedule=""), name="job_cron_has_schedule"),
            models.CheckConstraint(condition=Q(type__in=JobType.values), name="job_type_valid"),
            models.CheckConstraint(condition=Q(state__in=JobState.values), name="job_state_valid"),
            models.CheckConstraint(condition=Q(max_attempts__gte=1), name="job_max_attempts_positive"),
            models.CheckConstraint(condition=Q(timeout_sec__gte=1), name="job_timeout_positive"),
            models.CheckConstraint(
                condition=Q(max_delay_ms__gte=models.F("initial_delay_ms")), name="job_backoff_bounds"
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="job_tenant_created"),
            models.Index(fields=["tenant", "state"], name="job_tenant_state"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def is_one_off(self) -> bool:
        return self.type != JobType.CRON
