from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from executions.clock import db_now
from executions.models import Execution
from readmodels.selectors import execution_get, execution_list
from scheduling.execution_changes import execution_cancel, execution_redrive
from tenants.selectors import scope_of
from web.api.execution_filters import ExecutionFilter
from web.api.execution_serializers import ExecutionDetailSerializer, ExecutionSerializer
from web.audit import AuditedApi, Target
from web.rest import StateMergedExecutionPagination


def execution_or_404(request, execution_id) -> Execution:
    execution = execution_get(scope=scope_of(user=request.user), execution_id=execution_id)
    if execution is None:
        raise Http404("no such execution")
    return execution


@extend_schema_view(
    get=extend_schema(
        summary="List executions",
        description="The caller's executions, newest scheduled first, filtered by `state` (DEAD: the dead "
        "letter), `jobId` and `pool`.",
    )
)
class ExecutionListApi(generics.ListAPIView):
    serializer_class = ExecutionSerializer
    filterset_class = ExecutionFilter
    pagination_class = StateMergedExecutionPagination

    def get_queryset(self):
        return execution_list(scope=scope_of(user=self.request.user))


class ExecutionDetailApi(APIView):
    @extend_schema(
        summary="Get an execution",
        description="An execution with its history (`events`: each transition, its time, worker and message), "
        "its traceback if it failed, and why it waits if it is PENDING or QUEUED.",
        responses=ExecutionDetailSerializer,
    )
    def get(self, request, execution_id):
        return Response(ExecutionDetailSerializer(execution_or_404(request, execution_id)).data)


class ExecutionCancelApi(AuditedApi, APIView):
    audit_actions = {"POST": "execution.cancel"}
    audit_target_type, audit_id_kwarg = "execution", "execution_id"

    @extend_schema(
        summary="Cancel an execution",
        description="A PENDING, QUEUED or BLOCKED execution is CANCELLED at once; a RUNNING one is asked to stop: "
        "its worker reads the request at its next heartbeat, and the sweeper cancels it after a grace if it does "
        "not stop (`cancelRequestedAt` is set meanwhile). A finished execution answers 409.",
        request=None,
        responses={202: ExecutionSerializer},
    )
    def post(self, request, execution_id):
        execution = execution_or_404(request, execution_id)
        self.acting_on(Target.of_execution(execution))
        state = execution_cancel(execution=execution, now=db_now(), reason=f"cancelled by {request.user}")
        self.acting_on(
            Target.of_execution(execution), "cancelled" if state == "CANCELLED" else "cancel requested (running)"
        )
        execution.refresh_from_db()
        return Response(ExecutionSerializer(execution).data, status=status.HTTP_202_ACCEPTED)


class ExecutionRetryApi(AuditedApi, APIView):
    audit_actions = {"POST": "execution.retry"}
    audit_target_type, audit_id_kwarg = "execution", "execution_id"

    @extend_schema(
        summary="Retry an execution",
        description="Run a DEAD, FAILED or CANCELLED execution again, now, as its next attempt (a re-drive); its "
        "completed job becomes ACTIVE again. Any other state, or a cancelled job, answers 409.",
        request=None,
        responses=ExecutionSerializer,
    )
    def post(self, request, execution_id):
        execution = execution_or_404(request, execution_id)
        target = Target.of_execution(execution)
        self.acting_on(target)
        execution = execution_redrive(execution=execution, now=db_now(), reason=f"re-driven by {request.user}")
        self.acting_on(target, f"attempt {execution.attempt} pending")
        return Response(ExecutionSerializer(execution).data)
