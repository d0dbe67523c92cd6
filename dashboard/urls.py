from django.urls import path

from dashboard import alert_views, log_views, run_views, triage_views, upcoming_views, views, worker_views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/new", views.job_create, name="job-create"),
    path("jobs/bulk", views.jobs_bulk_action, name="jobs-bulk"),
    path("jobs/<uuid:job_id>/", views.job_detail, name="job-detail"),
    path("jobs/<uuid:job_id>/edit", views.job_edit, name="job-edit"),
    path("jobs/<uuid:job_id>/<str:action>", views.job_action, name="job-action"),
    path("jobs/<uuid:job_id>/versions/<int:number>/restore", views.job_version_restore, name="job-version-restore"),
    path("executions/", views.execution_list_view, name="executions"),
    path("executions/retry", views.executions_retry, name="executions-retry"),
    path("executions/<uuid:execution_id>/", views.execution_detail, name="execution-detail"),
    path("executions/<uuid:execution_id>/logs", log_views.execution_logs, name="execution-logs"),
    path("executions/<uuid:execution_id>/<str:action>", views.execution_action, name="execution-action"),
    path("runs/<uuid:run_id>/", run_views.run_detail, name="run-detail"),
    path("audit/", views.audit_log, name="audit"),
    path("alerts/", alert_views.alerts_page, name="alerts"),
    path("alerts/banner", alert_views.alert_banner, name="alert-banner"),
    path("upcoming/", upcoming_views.upcoming, name="upcoming"),
    path("workers/", worker_views.workers_page, name="workers"),
    path("workers/table", worker_views.workers_table, name="workers-table"),
    path("pools/<str:pool>/<str:action>", worker_views.pool_action, name="pool-action"),
    path("dead-letter/", triage_views.dead_letter_page, name="dead-letter"),
    path("dead-letter/<str:fingerprint>/", triage_views.dead_letter_group_page, name="dead-letter-group"),
    path(
        "dead-letter/<str:fingerprint>/<str:action>",
        triage_views.dead_letter_group_action,
        name="dead-letter-group-action",
    ),
]
