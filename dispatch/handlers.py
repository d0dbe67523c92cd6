"""The built-in handlers. Apps register their own the same way, in their `handlers.py`."""

from django.conf import settings

from dispatch.context import HandlerContext
from dispatch.http_call import perform_request
from jobs.registry import register


class HandlerFailure(Exception):
    pass


@register("noop")
def noop(ctx: HandlerContext):
    """Returns its payload."""
    return ctx.payload


@register("sleep")
def sleep(ctx: HandlerContext):
    """Sleeps `seconds` (default 1), stopping at once when cancelled."""
    seconds = float(ctx.payload.get("seconds", 1))
    ctx.sleep(seconds)
    return {"slept": seconds}


@register("fail")
def fail(ctx: HandlerContext):
    """Raises, unless `failTimes` is given and this is a later attempt than that."""
    fail_times = ctx.payload.get("failTimes")
    if fail_times is not None and ctx.attempt > int(fail_times):
        return {"succeededOnAttempt": ctx.attempt}
    raise HandlerFailure(ctx.payload.get("message", f"failing on purpose (attempt {ctx.attempt})"))


@register("http")
def http(ctx: HandlerContext):
    """Calls `url` with `method`, `headers` and `body` from the payload, signed with the tenant's
    secret. 2xx succeeds; anything else fails with the status in the error."""
    payload = ctx.payload
    if not payload.get("url"):
        raise HandlerFailure("payload.url is required")
    return perform_request(
        method=payload.get("method", "POST"),
        url=payload["url"],
        headers=payload.get("headers"),
        body=payload.get("body"),
        secret=ctx.signing_secret,
        timeout=float(payload.get("timeoutSec", settings.TICKWORK_HTTP_TIMEOUT_SECONDS)),
        allow_private=settings.TICKWORK_HTTP_ALLOW_PRIVATE,
        idempotency_key=ctx.idempotency_key,
    )
