import uuid

from django.db import models


class AuditOutcome(models.TextChoices):
    OK = "OK"  # the service did it
    REFUSED = "REFUSED"  # the object's state forbade it (e.g. resume a job that is not paused)
    INVALID = "INVALID"  # the input did not validate; nothing was written
    NOT_FOUND = "NOT_FOUND"  # no such object in the caller's scope
    ERROR = "ERROR"  # an unexpected failure; nothing was written


class ActorKind(models.TextChoices):
    """Where an action came from: the same person may act through each of them."""

    DASHBOARD = "dashboard"  # a signed-in user on the operator dashboard
    API = "api"  # a request to /v1/: an API token, or a session calling the API
    ADMIN = "admin"  # a staff user in Django's admin
    SYSTEM = "system"  # Tickwork itself: a job paused after its pauseAfterFailures failed fires
    CLI = "cli"  # a management command (`manage.py jobs`, `import_beat`): the operating system's user


# The actions the log holds, for the audit page's filter: "<target type>.<verb>".
ACTIONS = (
    "job.create",
    "job.bulk_create",
    "job.update",
    "job.restore",
    "job.pause",
    "job.auto_pause",
    "job.resume",
    "job.trigger",
    "job.cancel",
    "job.delete",
    "execution.cancel",
    "execution.retry",
    "execution.discard",
    "execution.delete",
    "run.cancel",
    "backfill.create",
    "backfill.cancel",
    "pool.pause",
    "pool.resume",
    "alert_rule.create",
    "alert_rule.update",
    "alert_rule.delete",
    "tenant.add",
    "tenant.change",
    "tenant.delete",
    "apitoken.add",
    "apitoken.change",
    "apitoken.delete",
    "user.add",
    "user.change",
    "user.delete",
    "group.add",
    "group.change",
    "group.delete",
    "auth.fail",
)


class AuditEntry(models.Model):
    """Who did what to which object, when, and how it ended: one row per action, whoever acted
    (dashboard, API, admin).

    Append-only. Rows are inserted and never updated or deleted; a database trigger refuses both
    (see dashboard's migration 0001, which created the table before it moved here). There are
    deliberately no foreign keys: an audit row must outlive the user, token, tenant or job it
    names, and a cascade or SET NULL would be exactly the update the log must never see. The ids
    are kept as plain values, the names as they were at the time.
    """

    at = models.DateTimeField()
    actor_id = models.IntegerField(null=True, blank=True)  # the user's id; none for an API token
    actor = models.CharField(max_length=150)
    # Null on the rows written before the kind was recorded, all of them dashboard actions: the
    # trigger refuses the UPDATE that would fill them in, and a default would make SQLite rebuild
    # the table (and drop its triggers) to add the column.
    actor_kind = models.CharField(max_length=10, choices=ActorKind.choices, null=True, blank=True)  # noqa: DJ001
    action = models.CharField(max_length=40)
    target_type = models.CharField(max_length=20)  # "job" | "execution" | "run" | "alert_rule" | "tenant" | …
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
        # The table the dashboard created: the model moved, its rows and trigger stayed.
        db_table = "dashboard_auditentry"
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["-at"], name="audit_at"),
            models.Index(fields=["tenant_id", "-at"], name="audit_tenant_at"),
            models.Index(fields=["job_id", "-at"], name="audit_job_at"),
            models.Index(fields=["target_id", "-at"], name="audit_target_at"),
            models.Index(fields=["actor_kind", "-at"], name="audit_kind_at"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target_id} {self.outcome}"
