"""The worker side of an execution: start under the lease, heartbeat, run, record the outcome.

Every write here is fenced by the lease token: a worker whose lease was taken away (it froze,
or the sweeper timed it out) can neither start, extend nor finish the run any more; its
heartbeat notices and stops the handler, forcibly if it does not cooperate within a grace.
"""

import functools
import json
import logging
import os
import queue
import signal
import socket
import threading
import time
import traceback as tb
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction

from background.process_thread import ProcessThread
from events.selectors import event_for_handler
from executions import transitions
from executions.clock import db_now
from executions.models import Execution
from executions.states import ExecutionState
from jobs import registry
from scheduling import runs
from scheduling.failures import execution_settle_failure
from store import Started, Success, store
from telemetry import tracing
from tenants.selectors import signing_secrets_now
from worker import log_capture
from worker.context import ExecutionStopped, HandlerContext, HandlerTimedOut

logger = logging.getLogger(__name__)
S = ExecutionState
# Exit code of a worker process that had to abandon a handler that would not stop.
FORCED_EXIT_CODE = 70
# The longest a worker that is shutting down gives its handlers to stop (or the cancel grace, if
# shorter) before it releases their runs itself and ends: the standalone supervisor allows its
# roles 6 s, systemd and Kubernetes 90 and 30 s by default.
SHUTDOWN_GRACE_SECONDS = 5.0
RELEASED = "released: worker shutting down"
# The signal by which a worker's cancel relay (worker/cancel_relay.py) asks one of its processes
# to beat now. SIGUSR1 is Celery's (a traceback dump) and billiard's (a soft time limit).
BEAT_NOW_SIGNAL = signal.SIGUSR2
# Set once this process is shutting down: the grace its runs get (see `release_runs`).
_shutdown_grace: float | None = None


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


class _Beat:
    """One run that this process heartbeats for."""

    def __init__(self, ctx: HandlerContext, lease_token: int, *, lease: float, grace: float) -> None:
        self.ctx = ctx
        self.lease_token = lease_token
        self.lease, self.grace = lease, grace
        # Monotonic time of the next beat or, once the run was asked to stop, of the forced stop.
        self.due = time.monotonic() + lease / 3
        self.stopping = False
        self.outcome: ExecutionState | None = None  # what to record if the handler stops
        # Asked to beat now (`beat_now`) since its last beat began: that beat may have read the
        # row before the request committed, so it beats once more at once.
        self.asked = False


class Heartbeats(ProcessThread):
    """The one thread of a worker process that extends the lease of each run it has going, every
    lease/3, and reads in the same UPDATE whether the run must stop. One thread for the process,
    not one per run: starting and joining a thread for every run was an eighth of a short run's
    time, and a run shorter than lease/3 (most of them) never beats at all.

    A run that must stop (cancelled, timed out, lease lost) gets `grace` seconds from the moment
    its stop was asked; then the outcome is recorded and the process ends."""

    def __init__(self) -> None:
        super().__init__(name="heartbeats")
        self.runs: set[_Beat] = set()
        self.changed = threading.Condition()
        self.idle = True  # waiting with no run to wait for: a new run must wake it
        self.shutdown_grace: float | None = None  # set once the process is shutting down

    def add(self, ctx: HandlerContext, lease_token: int, *, lease: float, grace: float) -> _Beat:
        beat = _Beat(ctx, lease_token, lease=lease, grace=grace)
        with self.changed:
            self.runs.add(beat)
            if self.shutdown_grace is None:  # a run that started while the process began to shut down
                self.shutdown_grace = _shutdown_grace
            if self.idle or self.shutdown_grace is not None:
                self.changed.notify()
        return beat

    def shut_down(self, grace: float) -> None:
        """The process is shutting down: ask every run (and any that starts from now on) to stop,
        to be released back to PENDING; one that has not stopped after `grace` seconds is released
        and the process ended. Safe in a signal handler: it only flags and notifies (the condition's
        lock is reentrant), and this thread does the rest."""
        with self.changed:
            self.shutdown_grace = grace
            self.changed.notify()

    def beat_now(self) -> None:
        """A run of this process may have just been asked to cancel (the worker's cancel relay
        says so): beat every run now, not at its next lease/3; the beat reads the request. A run
        already stopping keeps its due time, its forced stop. Safe in a signal handler, as
        `shut_down` is."""
        with self.changed:
            now = time.monotonic()
            for beat in self.runs:
                if not beat.stopping:
                    beat.asked = True
                    beat.due = min(beat.due, now)
            self.changed.notify()

    def remove(self, beat: _Beat) -> None:
        """The run is over: no more beats, and no forced stop."""
        with self.changed:
            self.runs.discard(beat)

    def run(self) -> None:
        while True:
            with self.changed:
                now = time.monotonic()
                releasing = []
                if self.shutdown_grace is not None:
                    # A run already stopping (cancelled) keeps its outcome.
                    releasing = [beat for beat in self.runs if not beat.stopping]
                    for beat in self.runs:
                        beat.stopping = True
                        beat.due = min(beat.due, now + self.shutdown_grace)
                due = [beat for beat in self.runs if beat.due <= now]
                for beat in due:
                    beat.asked = False
                if not due and not releasing:
                    # Back-to-back short runs never wake this thread: it sleeps until the
                    # earliest beat it knew of, and then looks again.
                    self.idle = not self.runs
                    if self.idle:
                        connection.close()  # hold no database connection while there is no run
                    self.changed.wait(None if self.idle else min(beat.due for beat in self.runs) - now)
                    continue
            # Outside the lock, which shut_down takes in a signal handler on the main thread: that
            # thread may hold the locks these take (logging's, the stop event's).
            for beat in releasing:
                self._request_stop(beat, S.PENDING, RELEASED)
            for beat in due:
                if beat.stopping:
                    self._force(beat)
                    continue
                try:
                    self._beat(beat)
                except Exception:  # a database blip must not silently end the heartbeats
                    logger.exception("heartbeat of %s failed; retrying", beat.ctx.execution_id)
                    connection.close()
                    beat.due = time.monotonic() + min(1.0, beat.lease / 3)
                    continue
                # The handler's grace to cooperate runs from the moment it was asked to stop, not
                # from the next beat: a forced stop comes at most lease/3 + grace after a cancel
                # request or the timeout, before the sweeper's backstop. Under the lock, so that a
                # beat_now that came during the beat is not overwritten.
                with self.changed:
                    if beat.asked and not beat.stopping:
                        beat.due = time.monotonic()
                    else:
                        beat.due = time.monotonic() + (beat.grace if beat.stopping else beat.lease / 3)

    def _beat(self, beat: _Beat) -> None:
        now = db_now()
        row = transitions.heartbeat(
            execution_id=beat.ctx.execution_id,
            lease_token=beat.lease_token,
            now=now,
            lease=timedelta(seconds=beat.lease),
        )
        if beat not in self.runs:  # the run ended meanwhile; its outcome is recorded
            return
        if row is None:
            self._request_stop(beat, None, "lease lost: the execution was reclaimed or finished elsewhere")
        elif row.cancel_requested_at is not None:
            self._request_stop(beat, S.CANCELLED, "cancelled")
        elif row.timeout_at is not None and now >= row.timeout_at:
            self._request_stop(beat, S.TIMED_OUT, "timed out")

    def _request_stop(self, beat: _Beat, outcome: ExecutionState | None, reason: str) -> None:
        logger.info("stopping execution %s: %s", beat.ctx.execution_id, reason)
        beat.stopping = True
        beat.outcome = outcome
        beat.ctx.reason = reason
        beat.ctx.stop_event.set()

    def _force(self, beat: _Beat) -> None:
        """The handler ignored the stop: record the outcome, then end this process. Celery's
        prefork pool replaces the child; nothing else can stop a thread stuck in C code."""
        with self.changed:
            if beat not in self.runs:  # it stopped after all, just now
                return
        ctx = beat.ctx
        logger.error("execution %s did not stop within %.0fs; ending worker process", ctx.execution_id, beat.grace)
        ctx.reason = f"{ctx.reason} (forced: the handler did not stop within {beat.grace:g}s)"
        try:
            log_capture.flush(ctx)  # what it logged before it got stuck says most about why
            _record_stop(ctx, beat.lease_token, beat.outcome)
            flush_outcomes(timeout=beat.grace)  # earlier runs' outcomes, not to be lost with us
        finally:
            os._exit(FORCED_EXIT_CODE)


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


def release_runs() -> None:
    """This process is shutting down: its runs are asked to stop and released back to PENDING
    (`Heartbeats.shut_down`). Safe to call from a signal handler."""
    global _shutdown_grace
    _shutdown_grace = min(settings.TICKWORK_CANCEL_GRACE_SECONDS, SHUTDOWN_GRACE_SECONDS)
    heartbeats = Heartbeats.current()  # none yet if the process's first run has only just started
    if heartbeats is not None:
        heartbeats.shut_down(_shutdown_grace)


def install_beat_now_signal() -> None:
    """Make BEAT_NOW_SIGNAL (sent by the worker's cancel relay) beat this process's runs at once.
    Its default action ends a process, so every process that can be sent it must have this
    handler first. Only the main thread can install a signal handler; call it there."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(BEAT_NOW_SIGNAL) != _beat_now:
        signal.signal(BEAT_NOW_SIGNAL, _beat_now)


def _beat_now(signum: int, frame: Any) -> None:
    heartbeats = Heartbeats.current()  # none: no run has started in this process, nothing to beat
    if heartbeats is not None:
        heartbeats.beat_now()


def flush_outcomes(timeout: float) -> bool:
    """Record the outcomes this process has queued, if any, waiting at most `timeout` seconds."""
    recorder = OutcomeRecorder.current()
    return recorder is None or recorder.flush(timeout)


def _record_stop(ctx: HandlerContext, lease_token: int, outcome: ExecutionState | None) -> None:
    now = db_now()
    if outcome == S.CANCELLED:
        transitions.cancel_running(execution_id=ctx.execution_id, lease_token=lease_token, now=now, reason=ctx.reason)
    elif outcome == S.TIMED_OUT:
        _record_failure(ctx, lease_token, S.TIMED_OUT, error=ctx.reason, trace="")
    elif outcome == S.PENDING:
        if Execution.objects.filter(pk=ctx.execution_id, cancel_requested_at__isnull=False).exists():
            ctx.reason = "cancelled (while its worker was shutting down)"
            _record_stop(ctx, lease_token, S.CANCELLED)
        else:
            transitions.release(execution_id=ctx.execution_id, lease_token=lease_token, now=now, reason=ctx.reason)
    # outcome None: the lease is someone else's now; there is nothing of ours to record.
    # A move that finds the lease gone records nothing either: the run is someone else's.


def _record_failure(ctx: HandlerContext, lease_token: int, state: ExecutionState, *, error: str, trace: str) -> None:
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


def run(*, execution_id: str, lease_token: int, defer_success: bool = False) -> ExecutionState | None:
    """Run one delivery of an execution. Returns the outcome recorded, or None when this
    delivery was not (or no longer) the lease holder and so recorded nothing. With
    `defer_success` (a worker's task), a success is handed to the OutcomeRecorder, and SUCCEEDED
    returned means handed over."""
    if _shutdown_grace is not None:
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
        _event=functools.partial(event_for_handler, row.event_id) if row.event_id else None,
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
        _record_stop(ctx, lease_token, beat.outcome)
        return beat.outcome
    except _Fenced:
        return None
    except Exception as exc:
        heartbeats.remove(beat)
        tracing.failed(exc)
        error = f"{exc.__class__.__name__}: {exc}"
        if ctx.stop_event.is_set():  # the handler failed because it was being stopped
            _record_stop(ctx, lease_token, beat.outcome)
            return beat.outcome
        if Execution.objects.filter(pk=ctx.execution_id, cancel_requested_at__isnull=False).exists():
            # Cancelled before a heartbeat could pass it on: a cancelled run is not retried.
            ctx.reason = f"cancelled (the handler then raised {error})"
            _record_stop(ctx, lease_token, S.CANCELLED)
            return S.CANCELLED
        if isinstance(exc, HandlerTimedOut):
            _record_failure(ctx, lease_token, S.TIMED_OUT, error=error, trace="")
            return S.TIMED_OUT
        _record_failure(ctx, lease_token, S.FAILED, error=error, trace=tb.format_exc())
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

    def start() -> Started | None:
        return transitions.start(
            execution_id=execution_id,
            lease_token=lease_token,
            now=db_now(),
            worker_id=worker_id(),
            lease=timedelta(seconds=lease),
        )

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
            if not _record_success(ctx.execution_id, lease_token, result, db_now()):
                raise _Fenced()
        return S.SUCCEEDED
    # A handler that returned did its work: record it even if a stop was asked meanwhile.
    with log_capture.attempt_log(ctx, handler=spec.name):  # its lines are written before its outcome
        result = spec.func(ctx)
        finished = db_now()  # when it returned, not when its lines or the recorder are written
    json.dumps(result)
    if defer:
        OutcomeRecorder.of_process().submit(Success(ctx.execution_id, lease_token, result, finished, ctx.run_id))
    elif not _record_success(ctx.execution_id, lease_token, result, finished):
        raise _Fenced()
    return S.SUCCEEDED


def _record_success(execution_id: str, lease_token: int, result: Any, now: datetime) -> bool:
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
