"""The dashboard's URLs, page by page: each page's views live in its own folder."""

from django.urls import path

from dashboard.alerts import views as alerts
from dashboard.audit import views as audit
from dashboard.dead_letter import views as dead_letter
from dashboard.executions import views as executions
from dashboard.fleet import views as fleet
from dashboard.jobs import backfills as job_backfills
from dashboard.jobs import editing as job_editing
from dashboard.jobs import views as jobs
from dashboard.overview import views as overview
from dashboard.runs import views as runs
from dashboard.upcoming import views as upcoming

app_name = "dashboard"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/new", job_editing.job_create, name="job-create"),
    path("jobs/bulk", jobs.jobs_bulk_action, name="jobs-bulk"),
    path("jobs/<uuid:job_id>/", jobs.job_detail, name="job-detail"),
    path("jobs/<uuid:job_id>/edit", job_editing.job_edit, name="job-edit"),
    # Before the job's actions' pattern, which would take "backfill" for an action's name.
    path("jobs/<uuid:job_id>/backfill", job_backfills.job_backfill, name="job-backfill"),
    path("jobs/<uuid:job_id>/<str:action>", jobs.job_action, name="job-action"),
    path("jobs/<uuid:job_id>/versions/<int:number>/restore", jobs.job_version_restore, name="job-version-restore"),
    path("backfills/<uuid:backfill_id>/cancel", job_backfills.backfill_cancel, name="backfill-cancel"),
    path("executions/", executions.execution_list_view, name="executions"),
    path("executions/retry", executions.executions_retry, name="executions-retry"),
    path("executions/<uuid:execution_id>/", executions.execution_detail, name="execution-detail"),
    path("executions/<uuid:execution_id>/logs", executions.execution_logs, name="execution-logs"),
    path("executions/<uuid:execution_id>/<str:action>", executions.execution_action, name="execution-action"),
    path("runs/<uuid:run_id>/", runs.run_detail, name="run-detail"),
    path("audit/", audit.audit_log, name="audit"),
    path("alerts/", alerts.alerts_page, name="alerts"),
    path("alerts/banner", alerts.alert_banner, name="alert-banner"),
    path("upcoming/", upcoming.upcoming, name="upcoming"),
    path("workers/", fleet.workers_page, name="workers"),
    path("workers/table", fleet.workers_table, name="workers-table"),
    path("pools/<str:pool>/<str:action>", fleet.pool_action, name="pool-action"),
    path("dead-letter/", dead_letter.dead_letter_page, name="dead-letter"),
    path("dead-letter/<str:fingerprint>/", dead_letter.dead_letter_group_page, name="dead-letter-group"),
    path(
        "dead-letter/<str:fingerprint>/<str:action>",
        dead_letter.dead_letter_group_action,
        name="dead-letter-group-action",
    ),
]
