import uuid

from django.db import models


class AuditOutcome(models.TextChoices):
    OK = "OK"  # the service did it
    REFUSED = "REFUSED"  # the object's state forbade it (e.g. resume a job that is not paused)
    INVALID = "INVALID"  # the input did not validate; nothing was written
    NOT_FOUND = "NOT_FOUND"  # no such object in the caller's scope
    ERROR = "ERROR"  # an unexpected failure; nothing was written


class AuditEntry(models.Model):
    """Who did what to which object, when, and how it ended: one row per dashboard action.

    Append-only. Rows are inserted and never updated or deleted; a database trigger refuses both
    (see migration 0001). There are deliberately no foreign keys: an audit row must outlive the
    user, tenant or job it names, and a cascade or SET NULL would be exactly the update the log
    must never see. The ids are kept as plain values, the names as they were at the time.
    """

    at = models.DateTimeField()
    actor_id = models.IntegerField(null=True, blank=True)
    actor = models.CharField(max_length=150)
    action = models.CharField(max_length=40)
    target_type = models.CharField(max_length=20)  # "job" | "execution"
    target_id = models.CharField(max_length=64, blank=True)
    target_label = models.CharField(max_length=200, blank=True)
    # The job an execution belongs to, so a job's page lists the actions on its executions too.
    job_id = models.UUIDField(null=True, blank=True)
    tenant_id = models.IntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=AuditOutcome.choices)
    detail = models.TextField(blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)
    # Groups the rows of one request (a bulk retry writes one row per execution).
    request_id = models.UUIDField(default=uuid.uuid4)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["-at"], name="audit_at"),
            models.Index(fields=["tenant_id", "-at"], name="audit_tenant_at"),
            models.Index(fields=["job_id", "-at"], name="audit_job_at"),
            models.Index(fields=["target_id", "-at"], name="audit_target_at"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target_id} {self.outcome}"
