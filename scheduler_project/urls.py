from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from scheduler_project.static_assets import static_asset
from web.api.alerts import AlertDetailApi, AlertListApi, AlertRuleDetailApi, AlertRuleListCreateApi
from web.api.backfills import BackfillCancelApi, BackfillDetailApi, JobBackfillApi, JobBackfillsApi
from web.api.dead_letter import DeadLetterGroupDiscardApi, DeadLetterGroupRetryApi, DeadLetterGroupsApi
from web.api.events import EventDetailApi, EventListCreateApi
from web.api.execution_logs import ExecutionLogsApi
from web.api.executions import ExecutionCancelApi, ExecutionDetailApi, ExecutionListApi, ExecutionRetryApi
from web.api.handlers import HandlerListApi
from web.api.health import HealthApi
from web.api.hooks import HookApi
from web.api.index import ApiIndexApi
from web.api.job_versions import JobVersionListApi, JobVersionRestoreApi
from web.api.jobs import (
    JobBulkCreateApi,
    JobDetailApi,
    JobExecutionsApi,
    JobListCreateApi,
    JobPauseApi,
    JobResumeApi,
    JobTriggerApi,
)
from web.api.pools import PoolListApi, PoolPauseApi, PoolResumeApi
from web.api.runs import JobRunsApi, RunCancelApi, RunDetailApi
from web.api.schedule_preview import SchedulePreviewApi
from web.metrics import metrics_view

api = [
    path("", ApiIndexApi.as_view(), name="api-index"),
    path("jobs", JobListCreateApi.as_view(), name="job-list"),
    path("jobs/bulk", JobBulkCreateApi.as_view(), name="job-bulk"),  # before jobs/<job_id>, which would take it
    path("jobs/<str:job_id>", JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<str:job_id>/pause", JobPauseApi.as_view(), name="job-pause"),
    path("jobs/<str:job_id>/resume", JobResumeApi.as_view(), name="job-resume"),
    path("jobs/<str:job_id>/trigger", JobTriggerApi.as_view(), name="job-trigger"),
    path("jobs/<str:job_id>/executions", JobExecutionsApi.as_view(), name="job-executions"),
    path("jobs/<str:job_id>/runs", JobRunsApi.as_view(), name="job-runs"),
    path("jobs/<str:job_id>/backfill", JobBackfillApi.as_view(), name="job-backfill"),
    path("jobs/<str:job_id>/backfills", JobBackfillsApi.as_view(), name="job-backfills"),
    path("jobs/<str:job_id>/versions", JobVersionListApi.as_view(), name="job-versions"),
    path("jobs/<str:job_id>/versions/<str:number>/restore", JobVersionRestoreApi.as_view(), name="job-version-restore"),
    path("executions", ExecutionListApi.as_view(), name="execution-list"),
    path("executions/<str:execution_id>", ExecutionDetailApi.as_view(), name="execution-detail"),
    path("executions/<str:execution_id>/cancel", ExecutionCancelApi.as_view(), name="execution-cancel"),
    path("executions/<str:execution_id>/retry", ExecutionRetryApi.as_view(), name="execution-retry"),
    path("executions/<str:execution_id>/logs", ExecutionLogsApi.as_view(), name="execution-logs"),
    path("runs/<str:run_id>", RunDetailApi.as_view(), name="run-detail"),
    path("runs/<str:run_id>/cancel", RunCancelApi.as_view(), name="run-cancel"),
    path("backfills/<str:backfill_id>", BackfillDetailApi.as_view(), name="backfill-detail"),
    path("backfills/<str:backfill_id>/cancel", BackfillCancelApi.as_view(), name="backfill-cancel"),
    path("handlers", HandlerListApi.as_view(), name="handler-list"),
    path("pools", PoolListApi.as_view(), name="pool-list"),
    path("pools/<str:pool>/pause", PoolPauseApi.as_view(), name="pool-pause"),
    path("pools/<str:pool>/resume", PoolResumeApi.as_view(), name="pool-resume"),
    path("schedule/preview", SchedulePreviewApi.as_view(), name="schedule-preview"),
    path("health", HealthApi.as_view(), name="health"),
    path("events", EventListCreateApi.as_view(), name="event-list"),
    path("events/<str:event_id>", EventDetailApi.as_view(), name="event-detail"),
    path("hooks/<str:tenant>/<str:event_name>", HookApi.as_view(), name="hook"),
    path("alerts", AlertListApi.as_view(), name="alert-list"),
    path("alerts/rules", AlertRuleListCreateApi.as_view(), name="alert-rule-list"),  # before alerts/<alert_id>
    path("alerts/rules/<str:rule_id>", AlertRuleDetailApi.as_view(), name="alert-rule-detail"),
    path("alerts/<str:alert_id>", AlertDetailApi.as_view(), name="alert-detail"),
    path("dead-letter/groups", DeadLetterGroupsApi.as_view(), name="dead-letter-groups"),
    path(
        "dead-letter/groups/<str:fingerprint>/retry", DeadLetterGroupRetryApi.as_view(), name="dead-letter-group-retry"
    ),
    path(
        "dead-letter/groups/<str:fingerprint>/discard",
        DeadLetterGroupDiscardApi.as_view(),
        name="dead-letter-group-discard",
    ),
    path("schema", SpectacularAPIView.as_view(permission_classes=[]), name="schema"),
    # Split: Swagger UI's start-up script is a file of its own, which the Content-Security-Policy allows.
    path("docs", SpectacularSwaggerSplitView.as_view(url_name="schema", permission_classes=[]), name="docs"),
]

# Under /v1/, what Django answers outside a view is JSON in the API's error shape (web/errors.py).
handler400 = "web.errors.bad_request"
handler403 = "web.errors.permission_denied"
handler404 = "web.errors.not_found"
handler500 = "web.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", include(api)),
    path("", RedirectView.as_view(pattern_name="dashboard:overview", permanent=False)),
    path("dashboard/", include("dashboard.urls")),
    path("accounts/", include("dashboard.accounts")),
    path("metrics", metrics_view, name="metrics"),  # Prometheus' text, not the JSON API: no schema
    re_path(r"^static/(?P<path>.*)$", static_asset),
]
