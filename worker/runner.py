"""The worker side of an execution: start under the lease, run the handler under the process's
heartbeats (worker/heartbeats.py), record the outcome (worker/outcomes.py).

Every write is fenced by the lease token: a worker whose lease was taken away (it froze, or the
sweeper timed it out) can neither start, extend nor finish the run any more; its heartbeat
notices and stops the handler, forcibly if it does not cooperate within a grace.
"""

import functools
import json
import logging
import os
import socket
import traceback as tb
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction

from events.selectors import event_for_handler
from executions import transitions
from executions.clock import db_now
from executions.models import Execution
from executions.states import ExecutionState
from jobs import registry
from scheduling import runs
from store import Started, Success, store
from telemetry import tracing
from tenants.selectors import signing_secrets_now
from worker import log_capture, rate_gate
from worker.context import ExecutionStopped, HandlerContext, HandlerTimedOut
from worker.heartbeats import Heartbeats, shutting_down
from worker.outcomes import OutcomeRecorder, record_failure, record_stop, record_success

logger = logging.getLogger(__name__)
S = ExecutionState


def worker_id() -> str:
    return _worker_id(os.getpid())


@functools.cache
def _worker_id(pid: int) -> str:
    # Asked once per run; the host name does not change under a worker process.
    return f"{socket.gethostname()}:{pid}"


class _Fenced(Exception):
    """The lease moved on while the handler ran: its outcome must not be recorded."""


class CheckpointStore:
    def __init__(self, execution_id: str, lease_token: int) -> None:
        self.execution_id = execution_id
        self.lease_token = lease_token

    def save(self, data: Any) -> None:
        if not transitions.save_checkpoint(
            execution_id=self.execution_id, lease_token=self.lease_token, data=data, now=db_now()
        ):
            raise ExecutionStopped("lease lost; checkpoint not saved")

    def load(self) -> Any:
        return Execution.objects.filter(pk=self.execution_id).values_list("checkpoint", flat=True).first()


def run(*, execution_id: str, lease_token: int, defer_success: bool = False) -> ExecutionState | None:
    """Run one delivery of an execution. Returns the outcome recorded, or None when this
    delivery was not (or no longer) the lease holder and so recorded nothing. With
    `defer_success` (a worker's task), a success is handed to the OutcomeRecorder, and SUCCEEDED
    returned means handed over."""
    if shutting_down():
        # A process that is shutting down (or a pool process forked from one: the filesystem
        # broker keeps delivering during Celery's warm shutdown) starts nothing more. The run
        # stays QUEUED and is published again after the publish grace; starting it only to
        # release it would loop between this worker and the dispatcher until the worker is gone.
        logger.info("not starting %s: this worker is shutting down; it stays QUEUED", execution_id)
        return None
    close_old_connections()
    lease = settings.TICKWORK_LEASE_SECONDS
    row = _start(execution_id, lease_token, lease=lease)
    if row is None:
        logger.info(
            "dropping delivery of %s (lease %s): not the current lease or not queued", execution_id, lease_token
        )
        return None
    handler, payload = row.handler, row.payload
    if row.run_id is not None:  # a workflow step: its own target and payload, as its run keeps them
        step = runs.step_spec(run_id=row.run_id, name=row.step)
        handler, payload = step["target"]["handler"], step.get("payload") or {}
    spec = registry.get(handler)
    ctx = HandlerContext(
        execution_id=str(row.id),
        job_id=str(row.job_id),
        attempt=row.attempt,
        payload=payload,
        tenant_slug=row.tenant_slug,
        signing_secret=row.signing_secret,
        _checkpoint_store=CheckpointStore(str(row.id), lease_token),
        run_id=str(row.run_id) if row.run_id else None,
        step=row.step,
        _upstream=functools.partial(runs.upstream_results, run_id=row.run_id, step=row.step) if row.run_id else None,
        _event=functools.partial(event_for_handler, row.event_id, row.id) if row.event_id else None,
        _signing_secrets=functools.partial(signing_secrets_now, slug=row.tenant_slug),
    )
    with tracing.run_span(row, handler=handler) as span:
        outcome = _run(ctx, spec, lease_token, handler=handler, lease=lease, defer_success=defer_success)
        tracing.outcome(span, outcome, reason=ctx.reason)
    return outcome


def _run(
    ctx: HandlerContext,
    spec: registry.HandlerSpec | None,
    lease_token: int,
    *,
    handler: str,
    lease: float,
    defer_success: bool,
) -> ExecutionState | None:
    """The started run under its heartbeats: the handler, then its outcome recorded (`run`)."""
    heartbeats = Heartbeats.of_process()
    beat = heartbeats.add(ctx, lease_token, lease=lease, grace=settings.TICKWORK_CANCEL_GRACE_SECONDS)
    try:
        if spec is None:
            raise LookupError(f"handler '{handler}' is not registered in this worker")
        defer = defer_success and not spec.atomic and store().batches_outcomes
        return _run_handler(ctx, spec, lease_token, defer=defer)
    except ExecutionStopped:
        heartbeats.remove(beat)
        record_stop(ctx, lease_token, beat.outcome)
        return beat.outcome
    except _Fenced:
        return None
    except Exception as exc:
        heartbeats.remove(beat)
        tracing.failed(exc)
        error = f"{exc.__class__.__name__}: {exc}"
        if ctx.stop_event.is_set():  # the handler failed because it was being stopped
            record_stop(ctx, lease_token, beat.outcome)
            return beat.outcome
        if Execution.objects.filter(pk=ctx.execution_id, cancel_requested_at__isnull=False).exists():
            # Cancelled before a heartbeat could pass it on: a cancelled run is not retried.
            ctx.reason = f"cancelled (the handler then raised {error})"
            record_stop(ctx, lease_token, S.CANCELLED)
            return S.CANCELLED
        if isinstance(exc, HandlerTimedOut):
            record_failure(ctx, lease_token, S.TIMED_OUT, error=error, trace="")
            return S.TIMED_OUT
        record_failure(ctx, lease_token, S.FAILED, error=error, trace=tb.format_exc())
        return S.FAILED
    finally:
        heartbeats.remove(beat)


def _start(execution_id: str, lease_token: int, *, lease: float) -> Started | None:
    """QUEUED → RUNNING under `lease_token` (`transitions.start`), once more on a new connection if the
    database connection turned out to be dead. After a PostgreSQL restart each worker process
    finds out on its next delivery; without the second try that delivery was lost and its run
    waited for the publish grace. The second try is safe: the start is conditional on the state
    and the lease token, so if the first did commit before the connection died, the second
    changes nothing and answers None (the delivery is dropped; the run's lease expires and the
    sweeper retries it, as after a worker crash at that point)."""

    def start_at(now: datetime) -> Started | None:
        return transitions.start(
            execution_id=execution_id,
            lease_token=lease_token,
            now=now,
            worker_id=worker_id(),
            lease=timedelta(seconds=lease),
        )

    def start() -> Started | None:
        # Within its rate limit, if it is held to one (worker/rate_gate.py).
        return rate_gate.start(start_at, stopping=shutting_down)

    try:
        return start()
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block or not _connection_lost():
            raise
        logger.warning("database connection lost; starting %s again on a new connection", execution_id)
        connection.close()
        return start()


def _connection_lost() -> bool:
    """Whether this thread's database connection is gone (closed, broken, or never opened)."""
    raw = connection.connection
    return raw is None or bool(getattr(raw, "closed", False))


def _run_handler(ctx: HandlerContext, spec: registry.HandlerSpec, lease_token: int, *, defer: bool) -> ExecutionState:
    if spec.atomic:
        # The handler's own writes and SUCCEEDED commit together, or neither does.
        with transaction.atomic():
            with log_capture.attempt_log(ctx, handler=spec.name):
                result = spec.func(ctx)
            json.dumps(result)  # a result that cannot be stored is a handler error, raised here
            if not record_success(ctx.execution_id, lease_token, result, db_now()):
                raise _Fenced()
        return S.SUCCEEDED
    # A handler that returned did its work: record it even if a stop was asked meanwhile.
    with log_capture.attempt_log(ctx, handler=spec.name):  # its lines are written before its outcome
        result = spec.func(ctx)
        finished = db_now()  # when it returned, not when its lines or the recorder are written
    json.dumps(result)
    if defer:
        OutcomeRecorder.of_process().submit(Success(ctx.execution_id, lease_token, result, finished, ctx.run_id))
    elif not record_success(ctx.execution_id, lease_token, result, finished):
        raise _Fenced()
    return S.SUCCEEDED
