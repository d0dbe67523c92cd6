"""What a run's outcome records, fenced by its lease token: a success (at once, or handed to the
process's OutcomeRecorder to be recorded with others in one statement), a failure and the retry
policy's verdict, a stop (cancelled, timed out, released at shutdown). A move that finds the lease
gone records nothing: the run is someone else's now."""

import functools
import logging
import queue
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import OperationalError, connection, transaction

from background.process_thread import ProcessThread
from executions import transitions
from executions.clock import db_now
from executions.models import Execution
from executions.states import ExecutionState
from scheduling.failures import execution_settle_failure
from store import Success
from worker.context import HandlerContext

logger = logging.getLogger(__name__)
S = ExecutionState


class OutcomeRecorder(ProcessThread):
    """Records the successes of this process's runs on a thread of its own, so that a worker
    slot takes its next message while the outcome commits. Measured on the benchmark: the
    outcome's round trip and commit were a third of a noop run's time in a worker slot. The
    successes that gather while it waits (LINGER_SECONDS) or while a batch commits are recorded
    together, in one statement and one commit (`transitions.succeed_many`).

    Nothing is given up by it: an outcome not recorded (the process died first, the database
    failed) leaves the run RUNNING under its lease, which expires and is retried by the policy,
    as when a worker dies just before its outcome; the handler has the execution id and attempt as
    an idempotency key. A process that ends normally records what is queued first
    (`flush_outcomes`, on Celery's worker_process_shutdown)."""

    # How long the first success of a batch waits for others: a commit saved per run matters more
    # to a busy worker than SUCCEEDED showing 10 ms sooner (finished_at is the handler's return).
    # Not for a workflow step's success, which the steps after it wait for.
    LINGER_SECONDS = 0.01
    BATCH = 500

    def __init__(self) -> None:
        super().__init__(name="outcomes")
        self.pending: queue.Queue = queue.Queue()

    def submit(self, record: Success | Callable[[], None]) -> None:
        """Queue a success to record, or any other call to make in this thread's turn."""
        self.pending.put(record)

    def flush(self, timeout: float) -> bool:
        """Wait until everything submitted is recorded; False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self.pending.all_tasks_done:
            while self.pending.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.pending.all_tasks_done.wait(remaining)
        return True

    def run(self) -> None:
        while True:
            item = self.pending.get()
            if not isinstance(item, Success):
                self._attempt(item)
                self.pending.task_done()
                continue
            if item.run_id is None:  # a step's goes at once: every edge of a chain would wait the linger
                time.sleep(self.LINGER_SECONDS)
            batch, other = [item], None
            while len(batch) < self.BATCH and other is None:
                try:
                    taken = self.pending.get_nowait()
                except queue.Empty:
                    break
                if isinstance(taken, Success):
                    batch.append(taken)
                else:
                    other = taken  # kept in order: after this batch
            self._attempt(functools.partial(_record_successes, batch))
            for _ in batch:
                self.pending.task_done()
            if other is not None:
                self._attempt(other)
                self.pending.task_done()

    @staticmethod
    def _attempt(record: Callable[[], None]) -> None:
        try:
            try:
                record()
            except OperationalError:  # a dropped connection: once more on a new one
                connection.close()
                record()
        except Exception:
            logger.exception("outcome not recorded; the run will be retried when its lease expires")
            connection.close()


def flush_outcomes(timeout: float) -> bool:
    """Record the outcomes this process has queued, if any, waiting at most `timeout` seconds."""
    recorder = OutcomeRecorder.current()
    return recorder is None or recorder.flush(timeout)


def record_stop(ctx: HandlerContext, lease_token: int, outcome: ExecutionState | None) -> None:
    now = db_now()
    if outcome == S.CANCELLED:
        transitions.cancel_running(execution_id=ctx.execution_id, lease_token=lease_token, now=now, reason=ctx.reason)
    elif outcome == S.TIMED_OUT:
        record_failure(ctx, lease_token, S.TIMED_OUT, error=ctx.reason, trace="")
    elif outcome == S.PENDING:
        if Execution.objects.filter(pk=ctx.execution_id, cancel_requested_at__isnull=False).exists():
            ctx.reason = "cancelled (while its worker was shutting down)"
            record_stop(ctx, lease_token, S.CANCELLED)
        else:
            transitions.release(execution_id=ctx.execution_id, lease_token=lease_token, now=now, reason=ctx.reason)
    # outcome None: the lease is someone else's now; there is nothing of ours to record.
    # A move that finds the lease gone records nothing either: the run is someone else's.


def record_failure(ctx: HandlerContext, lease_token: int, state: ExecutionState, *, error: str, trace: str) -> None:
    now = db_now()
    with transaction.atomic():
        if state == S.TIMED_OUT:
            failed = transitions.time_out(execution_id=ctx.execution_id, lease_token=lease_token, now=now, error=error)
        else:
            failed = transitions.fail(
                execution_id=ctx.execution_id, lease_token=lease_token, now=now, error=error, traceback=trace
            )
        if failed:
            execution_settle_failure(execution_id=ctx.execution_id, failed_state=state, now=now)


def record_success(execution_id: str, lease_token: int, result: Any, now: datetime) -> bool:
    recorded = transitions.succeed(execution_id=execution_id, lease_token=lease_token, now=now, result=result)
    if not recorded:
        logger.warning("execution %s finished after its lease moved on; outcome discarded", execution_id)
    return recorded


def _record_successes(successes: list[Success]) -> None:
    """Record a batch of successes in one statement. Should that statement fail while the
    database still answers, it was something in one run's outcome: each run is then recorded
    alone, so that no other run of the batch (of any tenant) is left RUNNING to be retried."""
    try:
        recorded = transitions.succeed_many(successes, now=db_now())
    except Exception as exc:
        if not _database_answers():
            raise  # the database's trouble, not the outcomes': the recorder tries again
        if len(successes) == 1:
            recorded = _record_success_without_result(successes[0], exc)
        else:
            logger.exception("%d outcomes could not be recorded together; recording each alone", len(successes))
            recorded = set().union(*(_record_success_alone(success) for success in successes))
    for success in successes:
        if str(success.execution_id) not in recorded:
            logger.warning("execution %s finished after its lease moved on; outcome discarded", success.execution_id)


def _record_success_alone(success: Success) -> set:
    try:
        return transitions.succeed_many([success], now=db_now())
    except Exception as exc:
        if not _database_answers():
            raise
        return _record_success_without_result(success, exc)


def _record_success_without_result(success: Success, exc: Exception) -> set:
    """A success whose result cannot be stored is still SUCCEEDED (its handler did its work, and
    a retry would do it again), with the result replaced by an error that says why."""
    logger.error("the result of execution %s cannot be stored", success.execution_id, exc_info=exc)
    why = f"the handler's result could not be stored ({exc.__class__.__name__}: {exc})"[:500]
    recorded = transitions.succeed_without_result(success=success, why=why)
    return {str(success.execution_id)} if recorded else set()


def _database_answers() -> bool:
    """Whether this thread's connection (a new one if it was closed) still runs a query: after a
    failed statement, it tells a value the database refused from a database that went away."""
    try:
        connection.ensure_connection()
        return connection.is_usable()
    except Exception:
        connection.close()
        return False
