"""GET /v1/pools: each pool's workers and what waits for them; the autoscaling signal."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from executions.clock import db_now
from executions.selectors import PoolOverview, pool_overviews
from tenants.selectors import scope_of


class PoolSerializer(serializers.Serializer):
    pool = serializers.CharField()
    workers = serializers.IntegerField(help_text="Live workers serving the pool.")
    slots = serializers.IntegerField(help_text="Their slots: runs they can hold at once.")
    busy = serializers.IntegerField(help_text="Slots running something, as the workers last reported.")
    admitted = serializers.IntegerField(help_text="QUEUED + RUNNING: on the broker or running.")
    queued = serializers.IntegerField()
    running = serializers.IntegerField()
    dueBacklog = serializers.IntegerField(help_text="PENDING executions whose time has come.")
    oldestDueAgeSec = serializers.FloatField(
        allow_null=True, help_text="How long the oldest of them has been due; null when none is."
    )


class PoolListSerializer(serializers.Serializer):
    results = PoolSerializer(many=True)
    next = serializers.CharField(allow_null=True)


def pool_as_json(p: PoolOverview, now) -> dict:
    return {
        "pool": p.pool,
        "workers": p.workers,
        "slots": p.slots,
        "busy": p.busy,
        "admitted": p.queued + p.running,
        "queued": p.queued,
        "running": p.running,
        "dueBacklog": p.due_backlog,
        "oldestDueAgeSec": round((now - p.oldest_due_at).total_seconds(), 3) if p.oldest_due_at else None,
    }


class PoolListApi(APIView):
    """Per pool: live workers, slots and busy slots (the whole fleet's), and the admitted work and
    due backlog of the tenants the caller may see (a tenant's token: its own; staff: all)."""

    @extend_schema(responses=PoolListSerializer)
    def get(self, request):
        now = db_now()
        pools = pool_overviews(scope=scope_of(user=request.user), now=now)
        return Response({"results": [pool_as_json(p, now) for p in pools], "next": None})
