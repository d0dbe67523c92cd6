"""The worker side of an execution: start under the lease, heartbeat, run, record the outcome.

Every write here is fenced by the lease token: a worker whose lease was taken away (it froze,
or the sweeper timed it out) can neither start, extend nor finish the run any more; its
heartbeat notices and stops the handler, forcibly if it does not cooperate within a grace.
"""

import json
import logging
import os
import socket
import threading
import traceback as tb
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from dispatch.context import ExecutionStopped, HandlerContext
from executions.models import Execution
from executions.services import execution_settle_failure
from executions.states import ExecutionState, start_run, transition
from jobs import registry

logger = logging.getLogger(__name__)
S = ExecutionState
# Exit code of a worker process that had to abandon a handler that would not stop.
FORCED_EXIT_CODE = 70


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class _Fenced(Exception):
    """The lease moved on while the handler ran: its outcome must not be recorded."""


class CheckpointStore:
    def __init__(self, execution_id: str, lease_token: int) -> None:
        self.execution_id = execution_id
        self.lease_token = lease_token

    def save(self, data: Any) -> None:
        updated = Execution.objects.filter(pk=self.execution_id, state=S.RUNNING, lease_token=self.lease_token).update(
            checkpoint=data, updated_at=timezone.now()
        )
        if not updated:
            raise ExecutionStopped("lease lost; checkpoint not saved")

    def load(self) -> Any:
        return Execution.objects.filter(pk=self.execution_id).values_list("checkpoint", flat=True).first()


class Heartbeat(threading.Thread):
    """Extends the lease every lease/3 and reads, in the same UPDATE, whether to stop."""

    def __init__(self, *, ctx: HandlerContext, lease_token: int, lease: float, grace: float) -> None:
        super().__init__(name=f"heartbeat-{ctx.execution_id}", daemon=True)
        self.ctx = ctx
        self.lease_token = lease_token
        self.lease = lease
        self.grace = grace
        self.finished = threading.Event()
        self.outcome: ExecutionState | None = None  # what to record if the handler stops
        # Raw SQL bypasses the ORM's conversion: SQLite stores UUIDs as 32 hex digits.
        self._db_id = Execution._meta.pk.get_db_prep_value(uuid.UUID(ctx.execution_id), connection)

    def run(self) -> None:
        try:
            while not self.finished.wait(self.lease / 3):
                try:
                    self._beat()
                except Exception:  # a database blip must not silently end the heartbeats
                    logger.exception("heartbeat of %s failed; retrying", self.ctx.execution_id)
                    connection.close()
                    continue
                if self.ctx.stop_event.is_set():
                    # The handler's grace to cooperate runs from the moment it was asked to
                    # stop, not from the next beat: a forced stop comes at most lease/3 + grace
                    # after a cancel request or the timeout, before the sweeper's backstop.
                    if not self.finished.wait(self.grace):
                        self._force()
                    return
        finally:
            connection.close()

    def _beat(self) -> None:
        now = timezone.now()
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE executions_execution SET lease_expires_at = %s, heartbeat_at = %s"
                " WHERE id = %s AND state = 'RUNNING' AND lease_token = %s"
                " RETURNING cancel_requested_at, timeout_at",
                [now + timedelta(seconds=self.lease), now, self._db_id, self.lease_token],
            )
            row = cursor.fetchone()
        if row is None:
            self._request_stop(None, "lease lost: the execution was reclaimed or finished elsewhere")
        elif row[0] is not None:
            self._request_stop(S.CANCELLED, "cancelled")
        elif row[1] is not None and now >= row[1]:
            self._request_stop(S.TIMED_OUT, "timed out")

    def _request_stop(self, outcome: ExecutionState | None, reason: str) -> None:
        logger.info("stopping execution %s: %s", self.ctx.execution_id, reason)
        self.outcome = outcome
        self.ctx.reason = reason
        self.ctx.stop_event.set()

    def _force(self) -> None:
        """The handler ignored the stop: record the outcome, then end this process. Celery's
        prefork pool replaces the child; nothing else can stop a thread stuck in C code."""
        logger.error("execution %s did not stop within %.0fs; ending worker process", self.ctx.execution_id, self.grace)
        self.ctx.reason = f"{self.ctx.reason} (forced: the handler did not stop within {self.grace:g}s)"
        try:
            _record_stop(self.ctx, self.lease_token, self.outcome)
        finally:
            os._exit(FORCED_EXIT_CODE)


def _record_stop(ctx: HandlerContext, lease_token: int, outcome: ExecutionState | None) -> None:
    now = timezone.now()
    if outcome == S.CANCELLED:
        transition(
            execution_id=ctx.execution_id,
            source=S.RUNNING,
            target=S.CANCELLED,
            now=now,
            lease_token=lease_token,
            message=ctx.reason,
            finished_at=now,
        )
    elif outcome == S.TIMED_OUT:
        _record_failure(ctx, lease_token, S.TIMED_OUT, error=ctx.reason, trace="")
    # outcome None: the lease is someone else's now; there is nothing of ours to record.


def _record_failure(ctx: HandlerContext, lease_token: int, state: ExecutionState, *, error: str, trace: str) -> None:
    now = timezone.now()
    with transaction.atomic():
        if transition(
            execution_id=ctx.execution_id,
            source=S.RUNNING,
            target=state,
            now=now,
            lease_token=lease_token,
            message=error[:500],
            finished_at=now,
            error=error,
            traceback=trace,
        ):
            execution_settle_failure(execution_id=ctx.execution_id, failed_state=state, now=now)


def run(*, execution_id: str, lease_token: int) -> ExecutionState | None:
    """Run one delivery of an execution. Returns the outcome recorded, or None when this
    delivery was not (or no longer) the lease holder and so recorded nothing."""
    close_old_connections()
    lease = settings.TICKWORK_LEASE_SECONDS
    now = timezone.now()
    row = start_run(
        execution_id=execution_id,
        lease_token=lease_token,
        now=now,
        worker_id=worker_id(),
        lease=timedelta(seconds=lease),
    )
    if row is None:
        logger.info(
            "dropping delivery of %s (lease %s): not the current lease or not queued", execution_id, lease_token
        )
        return None
    spec = registry.get(row.handler)
    ctx = HandlerContext(
        execution_id=str(row.id),
        job_id=str(row.job_id),
        attempt=row.attempt,
        payload=row.payload,
        tenant_slug=row.tenant_slug,
        signing_secret=row.signing_secret,
        _checkpoint_store=CheckpointStore(str(row.id), lease_token),
    )
    heartbeat = Heartbeat(ctx=ctx, lease_token=lease_token, lease=lease, grace=settings.TICKWORK_CANCEL_GRACE_SECONDS)
    heartbeat.start()
    try:
        if spec is None:
            raise LookupError(f"handler '{row.handler}' is not registered in this worker")
        return _run_handler(ctx, spec, lease_token)
    except ExecutionStopped:
        heartbeat.finished.set()
        _record_stop(ctx, lease_token, heartbeat.outcome)
        return heartbeat.outcome
    except _Fenced:
        logger.warning("execution %s finished after its lease moved on; outcome discarded", execution_id)
        return None
    except Exception as exc:
        heartbeat.finished.set()
        if ctx.stop_event.is_set():  # the handler failed because it was being stopped
            _record_stop(ctx, lease_token, heartbeat.outcome)
            return heartbeat.outcome
        _record_failure(ctx, lease_token, S.FAILED, error=f"{exc.__class__.__name__}: {exc}", trace=tb.format_exc())
        return S.FAILED
    finally:
        heartbeat.finished.set()
        heartbeat.join(timeout=5)


def _run_handler(ctx: HandlerContext, spec: registry.HandlerSpec, lease_token: int) -> ExecutionState:
    def succeed(result: Any) -> None:
        json.dumps(result)  # a result that cannot be stored is a handler error, raised here
        now = timezone.now()
        if not transition(
            execution_id=ctx.execution_id,
            source=S.RUNNING,
            target=S.SUCCEEDED,
            now=now,
            lease_token=lease_token,
            message="succeeded",
            finished_at=now,
            result=result,
        ):
            raise _Fenced()

    if spec.atomic:
        # The handler's own writes and SUCCEEDED commit together, or neither does.
        with transaction.atomic():
            succeed(spec.func(ctx))
    else:
        # A handler that returned did its work: record it even if a stop was asked meanwhile.
        succeed(spec.func(ctx))
    return S.SUCCEEDED
