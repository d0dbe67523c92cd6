"""Handlers that exist only for tests. Test workers import this module with
`celery worker --include testing.handlers_for_tests` (see harness.TEST_HANDLERS)."""

import logging
import threading
import time

from jobs.registry import register
from worker.context import HandlerContext

logger = logging.getLogger(__name__)


@register("test-stubborn")
def stubborn(ctx: HandlerContext):
    """Runs `seconds` (default 60) and never looks at cancellation: only a forced stop ends it."""
    deadline = time.monotonic() + float(ctx.payload.get("seconds", 60))
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return {"ignoredStops": True}


@register("test-atomic-noop", atomic=True)
def atomic_noop(ctx: HandlerContext):
    """Asks to run inside the completion transaction; does nothing else."""
    return {"atomic": True}


@register("test-cancelled-then-raises")
def cancelled_then_raises(ctx: HandlerContext):
    """Is cancelled (through the service, as the API does) while it runs, then fails before any
    heartbeat could tell it: the cancel must win over the retry policy."""
    from django.utils import timezone

    from executions.models import Execution
    from scheduling.execution_changes import execution_cancel

    execution_cancel(execution=Execution.objects.get(pk=ctx.execution_id), now=timezone.now())
    raise RuntimeError("failed after the cancel request")


@register("test-hold-outcomes")
def hold_outcomes(ctx: HandlerContext):
    """Holds this process's outcome thread until `waitFor` other executions are RUNNING (at most
    `seconds`, default 2): the successes of those runs then gather and are recorded as one batch."""
    from executions.models import Execution
    from worker.outcomes import OutcomeRecorder

    def hold() -> None:
        deadline = time.monotonic() + float(ctx.payload.get("seconds", 2))
        others = Execution.objects.filter(state="RUNNING").exclude(pk=ctx.execution_id)
        while others.count() < int(ctx.payload["waitFor"]) and time.monotonic() < deadline:
            time.sleep(0.02)

    OutcomeRecorder.of_process().submit(hold)
    return {"held": True}


@register("test-nul-result")
def nul_result(ctx: HandlerContext):
    """Returns a result with a NUL, which PostgreSQL cannot store as it is."""
    return {"note": "\x00"}


@register("test-upstream")
def upstream(ctx: HandlerContext):
    """A workflow step that returns its name, what its upstream steps returned and its payload."""
    return {"step": ctx.step, "upstream": ctx.upstream, "payload": ctx.payload}


@register("test-event")
def event(ctx: HandlerContext):
    """Returns the event that started its run (ctx.event), and its step's name if it is one."""
    return {"event": ctx.event, "step": ctx.step}


@register("test-logs")
def logs(ctx: HandlerContext):
    """Logs `lines` (default 2) pairs of lines, one by ctx.log and one by its module's logger,
    `seconds` apart (default 0); with `failFirst`, its first attempt then logs an error and raises."""
    pause = float(ctx.payload.get("seconds", 0))
    for n in range(1, int(ctx.payload.get("lines", 2)) + 1):
        ctx.log(f"attempt {ctx.attempt}: line {n} by ctx.log")
        logger.info("attempt %d: line %d by logging", ctx.attempt, n)
        if pause:
            ctx.sleep(pause)
    if ctx.payload.get("failFirst") and ctx.attempt == 1:
        logger.error("attempt %d: giving up", ctx.attempt)
        raise RuntimeError("failing the first attempt on purpose")
    return {"attempt": ctx.attempt}


@register("test-logs-threads")
def logs_threads(ctx: HandlerContext):
    """Logs from its own thread and from a thread it starts, by logging and by ctx.log; then waits
    (at most 5 s) for its first line to be in the database, and says whether it got there while
    it still ran: lines are written as they gather, not only at the end."""
    from executions.models import ExecutionLog

    logger.warning("from the handler's thread")

    def other() -> None:
        logger.warning("from a thread the handler started")
        ctx.log("ctx.log from a thread the handler started")

    helper = threading.Thread(target=other)
    helper.start()
    helper.join()
    ctx.log("ctx.log with a NUL \x00 and a lone surrogate \ud800", level="debug")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if ExecutionLog.objects.filter(execution_id=ctx.execution_id).exists():
            return {"writtenWhileRunning": True}
        time.sleep(0.05)
    return {"writtenWhileRunning": False}


@register("test-traced")
def traced(ctx: HandlerContext):
    """Makes a span of its own with the OpenTelemetry API (`test.inner`), as a handler would, and
    fails its first attempt inside it with `failFirst`."""
    from opentelemetry import trace

    with trace.get_tracer("tickwork.tests").start_as_current_span("test.inner") as span:
        span.set_attribute("test.attempt", ctx.attempt)
        if ctx.payload.get("failFirst") and ctx.attempt == 1:
            raise RuntimeError("failing the first attempt on purpose")
    return {"attempt": ctx.attempt}
