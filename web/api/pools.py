"""GET /v1/pools: each pool's workers and what waits for them; the autoscaling signal.
POST /v1/pools/{pool}/pause and /resume: staff stop and restart a whole pool's admission."""

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from executions.clock import db_now
from jobs.payloads import StrictSerializer
from pools.models import PoolPause
from readmodels.selectors import PoolOverview, pool_overviews
from scheduling.pool_pauses import UnknownPool, paused_pools, pool_pause, pool_resume
from tenants.selectors import scope_of
from web.audit import AuditedApi, Target
from web.authentication import actor_of
from web.rest import refuse_unknown_parameters


class PoolSerializer(serializers.Serializer):
    pool = serializers.CharField()
    workers = serializers.IntegerField(help_text="Live workers serving the pool.")
    slots = serializers.IntegerField(help_text="Their slots: runs they can hold at once.")
    busy = serializers.IntegerField(help_text="Slots running something, as the workers last reported.")
    admitted = serializers.IntegerField(help_text="QUEUED + RUNNING: on the broker or running.")
    queued = serializers.IntegerField()
    running = serializers.IntegerField()
    dueBacklog = serializers.IntegerField(
        help_text="PENDING executions whose time has come, waiting for a slot of the pool: the signal to add "
        "workers. Not those held by a paused job or a paused pool (pausedDue), nor those not due yet."
    )
    oldestDueAgeSec = serializers.FloatField(
        allow_null=True, help_text="How long the oldest of the backlog has been due; null when the backlog is empty."
    )
    pausedDue = serializers.IntegerField(
        help_text="PENDING executions whose time has come, held by a paused job or a paused pool (pendingReason "
        "JOB_PAUSED or POOL_PAUSED): no worker would run them; they run once resumed."
    )
    paused = serializers.BooleanField(help_text="An operator paused the pool: nothing of it is admitted.")
    pausedAt = serializers.DateTimeField(allow_null=True)
    pausedBy = serializers.CharField(allow_null=True, help_text="Who paused it, e.g. `user ops`.")
    pauseReason = serializers.CharField(allow_null=True)


class PoolListSerializer(serializers.Serializer):
    results = PoolSerializer(many=True)
    next = serializers.CharField(allow_null=True)


def pool_as_json(p: PoolOverview, now, pause: PoolPause | None) -> dict:
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
        "pausedDue": p.paused_due,
        "paused": pause is not None,
        "pausedAt": pause.paused_at if pause else None,
        "pausedBy": pause.paused_by if pause else None,
        "pauseReason": (pause.reason or None) if pause else None,
    }


class PoolListApi(APIView):
    """Per pool: live workers, slots and busy slots (the whole fleet's), and the admitted work and
    due backlog of the tenants the caller may see (a tenant's token: its own; staff: all)."""

    @extend_schema(summary="List pools", responses=PoolListSerializer)
    def get(self, request):
        refuse_unknown_parameters(request, ())  # every pool, on one page
        now = db_now()
        pools = pool_overviews(scope=scope_of(user=request.user), now=now)
        paused = paused_pools()
        return Response({"results": [pool_as_json(p, now, paused.get(p.pool)) for p in pools], "next": None})


class IsStaff(BasePermission):
    """Pools are shared by every tenant: only staff (a staff user's session) may stop one."""

    message = "only staff may pause or resume a pool: it is shared by every tenant"

    def has_permission(self, request, view) -> bool:
        return scope_of(user=request.user) is None


class PauseInputSerializer(StrictSerializer):
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text="Why, for the other operators."
    )


def _pool_now(request, pool: str) -> Response:
    """The pool as `GET /v1/pools` shows it, after the action."""
    now = db_now()
    found = next(p for p in pool_overviews(scope=scope_of(user=request.user), now=now) if p.pool == pool)
    return Response(pool_as_json(found, now, paused_pools().get(pool)))


_ACTION_RESPONSES = {
    200: PoolSerializer,
    400: OpenApiResponse(description="`reason` is not a string of at most 500 characters, or an unknown field."),
    403: OpenApiResponse(description="The caller is not staff (a tenant's token or a member)."),
    404: OpenApiResponse(description="No pool of that name is configured or named by a handler."),
}


class PoolPauseApi(AuditedApi, APIView):
    permission_classes = [IsStaff]
    audit_actions = {"POST": "pool.pause"}
    audit_target_type, audit_id_kwarg = "pool", "pool"

    @extend_schema(
        summary="Pause a pool",
        request=PauseInputSerializer,
        responses=_ACTION_RESPONSES,
        description="Pause a whole pool: nothing of it is admitted (its due work waits PENDING, pendingReason "
        "POOL_PAUSED) until it is resumed; what is QUEUED or RUNNING finishes. Staff only. Pausing a paused "
        "pool changes nothing (who paused it first, and when, stay).",
    )
    def post(self, request, pool: str):
        body = PauseInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        self.acting_on(Target(type="pool", id=pool, label=pool), body.validated_data.get("reason", ""))
        try:
            pool_pause(pool=pool, by=actor_of(request), reason=body.validated_data.get("reason", ""), now=db_now())
        except UnknownPool as exc:
            raise Http404(str(exc)) from exc
        return _pool_now(request, pool)


class PoolResumeApi(AuditedApi, APIView):
    permission_classes = [IsStaff]
    audit_actions = {"POST": "pool.resume"}
    audit_target_type, audit_id_kwarg = "pool", "pool"

    @extend_schema(
        summary="Resume a pool",
        request=None,
        responses=_ACTION_RESPONSES,
        description="Resume a paused pool: its due work is admitted at the dispatchers' next claim. Staff only. "
        "Resuming a pool that is not paused changes nothing.",
    )
    def post(self, request, pool: str):
        self.acting_on(Target(type="pool", id=pool, label=pool))
        try:
            pool_resume(pool=pool, now=db_now())
        except UnknownPool as exc:
            raise Http404(str(exc)) from exc
        return _pool_now(request, pool)
