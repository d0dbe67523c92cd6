from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from executions.models import Execution


class _BlankAsNullCharField(serializers.CharField):
    def to_representation(self, value):
        return super().to_representation(value) or None


class ExecutionEventSerializer(serializers.Serializer):
    """One step of an execution's history; `from` is null for the step that created it."""

    time = serializers.DateTimeField(source="at")
    # `from` is a Python keyword: declared as `from_` and renamed in get_fields, so the
    # OpenAPI schema and the JSON both say `from`.
    from_ = _BlankAsNullCharField(source="from_state", allow_null=True)
    to = serializers.CharField(source="to_state")
    attempt = serializers.IntegerField()
    worker = serializers.CharField(source="worker_id")
    message = serializers.CharField()

    def get_fields(self):
        return {("from" if name == "from_" else name): field for name, field in super().get_fields().items()}


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

    class Meta:
        model = Execution
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
            "result",
            "error",
        ]
        read_only_fields = fields


class ExecutionDetailSerializer(ExecutionSerializer):
    events = serializers.SerializerMethodField()

    class Meta(ExecutionSerializer.Meta):
        fields = [*ExecutionSerializer.Meta.fields, "traceback", "events"]
        read_only_fields = fields

    @extend_schema_field(ExecutionEventSerializer(many=True))
    def get_events(self, execution: Execution) -> list[dict]:
        from executions.selectors import execution_events

        return ExecutionEventSerializer(execution_events(execution=execution), many=True).data  # type: ignore[return-value]  # a ReturnList
