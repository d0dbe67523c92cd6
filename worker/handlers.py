"""The built-in handlers. Apps register their own the same way, in their `handlers.py`."""

from django.conf import settings
from rest_framework import serializers

from jobs.payloads import StrictSerializer
from jobs.registry import register
from outbound.http_call import ALLOWED_METHODS, HttpCallError, check_url, perform_request
from worker import celery_bridge
from worker.context import HandlerContext

MAX_SECONDS = 7 * 86400


class HandlerFailure(Exception):
    pass


@register("noop")
def noop(ctx: HandlerContext):
    """Returns its payload."""
    return ctx.payload


class SleepPayload(StrictSerializer):
    seconds = serializers.FloatField(min_value=0, max_value=MAX_SECONDS, required=False)


@register("sleep", payload=SleepPayload)
def sleep(ctx: HandlerContext):
    """Sleeps `seconds` (default 1), stopping at once when cancelled."""
    seconds = float(ctx.payload.get("seconds", 1))
    ctx.sleep(seconds)
    return {"slept": seconds}


class FailPayload(StrictSerializer):
    failTimes = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    message = serializers.CharField(max_length=10_000, required=False, allow_blank=True)


@register("fail", payload=FailPayload)
def fail(ctx: HandlerContext):
    """Raises, unless `failTimes` is given and this is a later attempt than that."""
    fail_times = ctx.payload.get("failTimes")
    if fail_times is not None and ctx.attempt > int(fail_times):
        return {"succeededOnAttempt": ctx.attempt}
    raise HandlerFailure(ctx.payload.get("message", f"failing on purpose (attempt {ctx.attempt})"))


class HttpPayload(StrictSerializer):
    url = serializers.CharField(max_length=2048)
    method = serializers.CharField(required=False, help_text=f"One of {', '.join(sorted(ALLOWED_METHODS))}.")
    headers = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    body = serializers.JSONField(required=False, allow_null=True)
    timeoutSec = serializers.FloatField(min_value=0.001, max_value=MAX_SECONDS, required=False)

    def validate_url(self, value: str) -> str:
        try:
            check_url(value)
        except HttpCallError as exc:
            raise serializers.ValidationError(str(exc).removeprefix("refused: ")) from None
        return value

    def validate_method(self, value: str) -> str:
        if value.upper() not in ALLOWED_METHODS:
            raise serializers.ValidationError(
                f'"{value}" is not a valid choice; valid: {", ".join(sorted(ALLOWED_METHODS))}'
            )
        return value


@register("http", payload=HttpPayload)
def http(ctx: HandlerContext):
    """Calls `url` with `method`, `headers` and `body` from the payload, signed with the tenant's
    secret (and its previous one for a day after a rotation). 2xx succeeds; anything else fails
    with the status in the error."""
    payload = ctx.payload
    if not payload.get("url"):
        raise HandlerFailure("payload.url is required")
    return perform_request(
        method=payload.get("method", "POST"),
        url=payload["url"],
        headers=payload.get("headers"),
        body=payload.get("body"),
        secrets=ctx.signing_secrets,
        timeout=float(payload.get("timeoutSec", settings.TICKWORK_HTTP_TIMEOUT_SECONDS)),
        allow_private=settings.TICKWORK_HTTP_ALLOW_PRIVATE,
        idempotency_key=ctx.idempotency_key,
    )


@register("celery", payload=celery_bridge.CeleryPayload)
def celery(ctx: HandlerContext):
    """Sends a task to a Celery app that Tickwork does not own, through a bridge the operator
    configured (TICKWORK_CELERY_BRIDGES); with `wait`, waits for its result and returns it."""
    return celery_bridge.send(ctx)
