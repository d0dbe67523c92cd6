from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from executions.clock import db_now
from executions.models import Execution
from executions.states import ExecutionState
from readmodels.pending_reasons import REASONS, Reason, pending_reasons
from web.api.job_fields import StoredChoiceField


class _BlankAsNullCharField(serializers.CharField):
    def to_representation(self, value):
        return super().to_representation(value) or None


class _NoStateYet(StoredChoiceField):
    """The state an event moved from; null for the event that created the execution."""

    def to_representation(self, value):
        return super().to_representation(value) or None


class ExecutionEventSerializer(serializers.Serializer):
    """One step of an execution's history; `from` is null for the step that created it."""

    time = serializers.DateTimeField(source="at")
    # `from` is a Python keyword: declared as `from_` and renamed in get_fields, so the
    # OpenAPI schema and the JSON both say `from`.
    from_ = _NoStateYet(ExecutionState.choices, source="from_state", allow_null=True)
    to = StoredChoiceField(ExecutionState.choices, source="to_state")
    attempt = serializers.IntegerField()
    worker = serializers.CharField(source="worker_id")
    message = serializers.CharField()

    def get_fields(self):
        return {("from" if name == "from_" else name): field for name, field in super().get_fields().items()}


# Where a serialized execution carries its reason to wait (pending_reasons), once read.
_REASON = "_pending_reason"


class _ExecutionListSerializer(serializers.ListSerializer):
    def to_representation(self, data):
        # The reasons of a page of executions are read together: once per page, not per row.
        executions = list(data.all() if hasattr(data, "all") else data)
        reasons = pending_reasons(executions, now=db_now())
        for execution in executions:
            setattr(execution, _REASON, reasons.get(execution.pk))
        return super().to_representation(executions)


class ExecutionSerializer(serializers.ModelSerializer):
    executionId = serializers.CharField(source="id")
    jobId = serializers.CharField(source="job_id")
    scheduledFor = serializers.DateTimeField(source="scheduled_for")
    availableAt = serializers.DateTimeField(source="available_at")
    queuedAt = serializers.DateTimeField(source="queued_at", allow_null=True)
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    cancelRequestedAt = serializers.DateTimeField(source="cancel_requested_at", allow_null=True)
    leaseExpiresAt = serializers.DateTimeField(source="lease_expires_at", allow_null=True)
    workerId = serializers.CharField(source="worker_id")
    runId = serializers.CharField(
        source="run_id",
        allow_null=True,
        help_text="A workflow step's run (GET /v1/runs/{runId}); null for a plain job.",
    )
    step = _BlankAsNullCharField(allow_null=True, help_text="A workflow step's name; null for a plain job.")
    pendingReason = serializers.SerializerMethodField()
    pendingDetail = serializers.SerializerMethodField()

    class Meta:
        model = Execution
        list_serializer_class = _ExecutionListSerializer
        fields = [
            "executionId",
            "jobId",
            "attempt",
            "state",
            "origin",
            "pool",
            "scheduledFor",
            "availableAt",
            "queuedAt",
            "startedAt",
            "finishedAt",
            "cancelRequestedAt",
            "leaseExpiresAt",
            "workerId",
            "runId",
            "step",
            "result",
            "error",
            "pendingReason",
            "pendingDetail",
        ]
        read_only_fields = fields

    def _reason(self, execution: Execution) -> Reason | None:
        if not hasattr(execution, _REASON):  # one execution alone, not a page
            setattr(execution, _REASON, pending_reasons([execution], now=db_now()).get(execution.pk))
        return getattr(execution, _REASON)

    @extend_schema_field(serializers.ChoiceField(choices=REASONS, allow_null=True))
    def get_pendingReason(self, execution: Execution) -> str | None:
        """Why it has not started (null unless PENDING or QUEUED); see docs/admission.md."""
        reason = self._reason(execution)
        return reason.code if reason else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_pendingDetail(self, execution: Execution) -> str | None:
        reason = self._reason(execution)
        return reason.detail if reason else None


class ExecutionDetailSerializer(ExecutionSerializer):
    events = serializers.SerializerMethodField()
    traceId = serializers.SerializerMethodField()

    class Meta(ExecutionSerializer.Meta):
        fields = [*ExecutionSerializer.Meta.fields, "traceback", "events", "traceId"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True, min_length=32, max_length=32))
    def get_traceId(self, execution: Execution) -> str | None:
        """The OpenTelemetry trace its dispatch and runs are in (32 hex digits: search for it in
        the tracing backend); null when it was made with tracing off (README, "Tracing")."""
        return execution.traceparent[3:35] or None

    @extend_schema_field(ExecutionEventSerializer(many=True))
    def get_events(self, execution: Execution) -> list[dict]:
        from readmodels.selectors import execution_events

        return ExecutionEventSerializer(execution_events(execution=execution), many=True).data  # type: ignore[return-value]  # a ReturnList
