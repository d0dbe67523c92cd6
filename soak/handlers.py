"""The soak's handler (soak/run.py). Its workers import this module with `--include
soak.handlers` and its web role through soak/asgi.py, so that the API accepts the name; nothing
else loads it."""

from django.db import connection

from jobs.registry import register
from worker.context import HandlerContext


class SoakFailure(Exception):
    pass


@register("soak-effect")
def effect(ctx: HandlerContext):
    """Fails its first `failTimes` attempts, sleeps `seconds` (stopping at once when asked),
    then makes its effect: a row in soak_effect, committed on its own as an effect outside
    Tickwork would be (a mail sent, a call made), so a run that is cut short after it has made
    its effect shows. The audit counts effects per run."""
    from worker.runner import worker_id

    worker = worker_id()
    if ctx.attempt <= int(ctx.payload.get("failTimes", 0)):
        raise SoakFailure(f"failing on purpose: attempt {ctx.attempt} of {worker}")
    ctx.sleep(float(ctx.payload.get("seconds", 0)))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO soak_effect (execution_id, attempt, worker) VALUES (%s::uuid, %s, %s)",
            [ctx.execution_id, ctx.attempt, worker],
        )
    return {"attempt": ctx.attempt, "worker": worker}
