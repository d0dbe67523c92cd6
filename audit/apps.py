from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit log"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The system's pause of a job is audited in its own transaction (jobs.transitions.auto_pause).
        from audit.services import audit_auto_pause
        from jobs import transitions

        transitions.on_auto_pause(audit_auto_pause)
