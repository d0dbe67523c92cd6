from rest_framework import serializers

from executions.models import Execution


class ExecutionEventSerializer(serializers.Serializer):
    time = serializers.DateTimeField(source="at")
    # `from` is a Python keyword, so the field is declared under another name and renamed.
    from_ = serializers.CharField(source="from_state")
    to = serializers.CharField(source="to_state")
    attempt = serializers.IntegerField()
    worker = serializers.CharField(source="worker_id")
    message = serializers.CharField()

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["from"] = data.pop("from_") or None
        return data


class ExecutionSerializer(serializers.ModelSerializer):
    executionId = serializers.CharField(source="id")
    jobId = serializers.CharField(source="job_id")
    scheduledFor = serializers.DateTimeField(source="scheduled_for")
    availableAt = serializers.DateTimeField(source="available_at")
    queuedAt = serializers.DateTimeField(source="queued_at")
    startedAt = serializers.DateTimeField(source="started_at")
    finishedAt = serializers.DateTimeField(source="finished_at")
    cancelRequestedAt = serializers.DateTimeField(source="cancel_requested_at")
    leaseExpiresAt = serializers.DateTimeField(source="lease_expires_at")
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

    def get_events(self, execution: Execution) -> list[dict]:
        from executions.selectors import execution_events

        return ExecutionEventSerializer(execution_events(execution=execution), many=True).data
