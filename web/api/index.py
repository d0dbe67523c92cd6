"""GET /v1/: where the API's parts are, for a person or a client starting from the base URL."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

# (name, path under /v1/, what it is); {id} parts are filled in by the caller.
ENDPOINTS = [
    ("jobs", "jobs", "list (GET) and create (POST) jobs"),
    ("jobsBulk", "jobs/bulk", "POST: create up to 1,000 jobs, all or nothing"),
    ("job", "jobs/{jobId}", "a job: GET, PUT, PATCH, DELETE (cancel)"),
    ("jobPause", "jobs/{jobId}/pause", "POST: pause"),
    ("jobResume", "jobs/{jobId}/resume", "POST: resume"),
    ("jobTrigger", "jobs/{jobId}/trigger", "POST: run now, outside the schedule"),
    ("jobExecutions", "jobs/{jobId}/executions", "a job's executions, newest first"),
    ("jobVersions", "jobs/{jobId}/versions", "a job's definition history, newest first, with diffs"),
    ("jobVersionRestore", "jobs/{jobId}/versions/{n}/restore", "POST: make version n current again"),
    ("jobBackfill", "jobs/{jobId}/backfill", "POST: run the job's past fires in [from, to) once each; dryRun"),
    ("jobBackfills", "jobs/{jobId}/backfills", "a job's backfills, newest first"),
    ("backfill", "backfills/{backfillId}", "a backfill: its parameters, state and progress"),
    ("backfillCancel", "backfills/{backfillId}/cancel", "POST: release no more, cancel its runs not started"),
    ("executions", "executions", "executions; ?state=DEAD is the dead-letter queue"),
    ("execution", "executions/{executionId}", "an execution with its events"),
    ("executionCancel", "executions/{executionId}/cancel", "POST: cancel"),
    ("executionRetry", "executions/{executionId}/retry", "POST: re-drive a DEAD, FAILED or CANCELLED one"),
    ("executionLogs", "executions/{executionId}/logs", "what the handler logged, per attempt; ?attempt=, ?after="),
    ("deadLetterGroups", "dead-letter/groups", "DEAD executions grouped by error fingerprint, newest first"),
    ("deadLetterGroupRetry", "dead-letter/groups/{fingerprint}/retry", "POST: re-drive a whole error group"),
    ("deadLetterGroupDiscard", "dead-letter/groups/{fingerprint}/discard", "POST: discard a whole error group"),
    ("handlers", "handlers", "the handlers this server runs: pool, description, payload as JSON Schema"),
    ("pools", "pools", "per pool: workers, slots, busy, admitted, due backlog, paused (the autoscaling signal)"),
    ("poolPause", "pools/{pool}/pause", "POST (staff): admit nothing of the pool until it is resumed"),
    ("poolResume", "pools/{pool}/resume", "POST (staff): admit the pool's due work again"),
    ("schedulePreview", "schedule/preview", "next fire times of a cron schedule (no token needed)"),
    ("health", "health", "200 when the database and broker answer (no token needed)"),
    ("events", "events", "post an event (POST: starts the event jobs it matches) and list events"),
    ("event", "events/{eventId}", "an event and what it started"),
    ("hook", "hooks/{tenant}/{eventName}", "POST: an inbound webhook, signed (X-Tickwork-Signature), no token"),
    ("alerts", "alerts", "active and recent alerts, newest first; ?state=FIRING is what is active now"),
    ("alert", "alerts/{alertId}", "an alert with its notifications"),
    ("alertRules", "alerts/rules", "list (GET) and create (POST) alert rules"),
    ("alertRule", "alerts/rules/{ruleId}", "an alert rule: GET, PATCH, DELETE"),
    ("schema", "schema", "the OpenAPI 3 schema (no token needed)"),
    ("docs", "docs", "the API docs, Swagger UI (no token needed)"),
]


class ApiIndexApi(APIView):
    """The API's endpoints, with links; no token needed."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(
        summary="List the API's endpoints",
        responses=inline_serializer(
            "ApiIndex",
            {
                "name": serializers.CharField(),
                "authentication": serializers.CharField(),
                "endpoints": serializers.DictField(child=serializers.DictField(child=serializers.CharField())),
            },
        ),
    )
    def get(self, request):
        base = request.build_absolute_uri("/v1/")
        return Response(
            {
                "name": "Tickwork API",
                "authentication": "Authorization: Bearer <token> (python manage.py create_token <tenant>)",
                "endpoints": {name: {"url": base + path, "does": does} for name, path, does in ENDPOINTS},
            }
        )
