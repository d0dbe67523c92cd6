from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Operator dashboard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from audit import services as audit
        from dashboard.live import publisher
        from executions import observers

        # Every state change, and every change to a job, reaches the live views (after its commit).
        observers.subscribe(publisher.publish_state_changes)
        audit.on_job_change(publisher.publish_job_changes)
