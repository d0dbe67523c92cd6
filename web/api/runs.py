"""Runs of workflow jobs: `GET /v1/runs/{runId}`, `POST /v1/runs/{runId}/cancel` and
`GET /v1/jobs/{id}/runs`. A run's state is its steps' (readmodels.runs.run_state)."""

from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from executions.clock import db_now
from executions.models import Origin, Run
from executions.states import ExecutionState
from jobs.selectors import job_get
from readmodels.runs import RUN_STATES, run_list, run_state
from scheduling import runs
from tenants.selectors import scope_of
from web.api.job_fields import StoredChoiceField
from web.audit import AuditedApi, Target
from web.rest import Pagination


class RunStepSerializer(serializers.Serializer):
    step = serializers.CharField(help_text="The step's name in its workflow.")
    executionId = serializers.CharField(help_text="The step's execution (GET /v1/executions/{id}).")
    state = StoredChoiceField(
        ExecutionState.choices, help_text="The execution's state; BLOCKED while its upstream steps run."
    )
    attempt = serializers.IntegerField()
    dependsOn = serializers.ListField(child=serializers.CharField())


class RunSerializer(serializers.Serializer):
    runId = serializers.CharField(source="id")
    jobId = serializers.CharField(source="job_id")
    state = serializers.SerializerMethodField()
    origin = StoredChoiceField(Origin.choices, help_text="What started the run.")
    scheduledFor = serializers.DateTimeField(source="scheduled_for")
    createdAt = serializers.DateTimeField(source="created_at")
    eventId = serializers.CharField(source="event_id", allow_null=True, help_text="The event that started it.")
    steps = serializers.SerializerMethodField()

    @extend_schema_field(
        {
            "type": "string",
            "enum": list(RUN_STATES),
            "description": "PENDING while none of its steps has begun (each BLOCKED, or PENDING on its first "
            "attempt: waiting for its time or a slot, as a cron job's next run does); RUNNING while a step has "
            "begun and one can still run; then FAILED (a step ended DEAD), CANCELLED (a step was cancelled) or "
            "SUCCEEDED.",
        }
    )
    def get_state(self, run: Run) -> str:
        return run_state((execution.state, execution.attempt) for execution in run.executions.all())

    @extend_schema_field(RunStepSerializer(many=True))
    def get_steps(self, run: Run) -> list[dict]:
        by_step = {execution.step: execution for execution in run.executions.all()}
        return [
            {
                "step": step["name"],
                "executionId": str(by_step[step["name"]].pk),
                "state": by_step[step["name"]].state,
                "attempt": by_step[step["name"]].attempt,
                "dependsOn": list(step.get("depends_on") or []),
            }
            for step in run.steps
            if step["name"] in by_step
        ]


def _runs(request):
    return run_list(scope=scope_of(user=request.user)).prefetch_related("executions")


def _run_or_404(request, run_id) -> Run:
    try:
        run = _runs(request).filter(pk=run_id).first()
    except ValidationError:  # a malformed id is simply not found
        run = None
    if run is None:
        raise Http404("no such run")
    return run


class RunDetailApi(APIView):
    @extend_schema(
        summary="Get a run",
        description="A run of a workflow job (one fire of it): its state and each step's execution, with the "
        "steps it waits for.",
        responses=RunSerializer,
    )
    def get(self, request, run_id):
        return Response(RunSerializer(_run_or_404(request, run_id)).data)


class RunCancelApi(AuditedApi, APIView):
    audit_actions = {"POST": "run.cancel"}
    audit_target_type, audit_id_kwarg = "run", "run_id"

    @extend_schema(
        summary="Cancel a run",
        request=None,
        responses={202: RunSerializer},
        description="Cancel the run's unfinished steps: BLOCKED, PENDING and QUEUED ones at once, RUNNING ones "
        "cooperatively (as POST /v1/executions/{id}/cancel). A finished run answers 202 and changes nothing.",
    )
    def post(self, request, run_id):
        run = _run_or_404(request, run_id)
        self.acting_on(Target(type="run", id=str(run.pk), job_id=run.job_id, tenant_id=run.tenant_id))
        runs.cancel_run(run_id=run.pk, now=db_now(), reason=f"run cancelled by {request.user}")
        return Response(RunSerializer(_run_or_404(request, run_id)).data, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(get=extend_schema(summary="List a job's runs"))
class JobRunsApi(generics.ListAPIView):
    """A job's runs, newest first (a workflow job's; a plain job's runs are its executions)."""

    serializer_class = RunSerializer
    pagination_class = Pagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no job
            return Run.objects.none()
        job = job_get(scope=scope_of(user=self.request.user), job_id=self.kwargs["job_id"])
        if job is None:
            raise Http404("no such job")
        return _runs(self.request).filter(job=job)
