"""The lease's heartbeats: one thread per worker process extends the lease of each run it has
going and reads, in the same statement, whether the run must stop (cancelled, timed out, lease
lost); a run that does not stop within its grace is recorded and its process ended. The worker's
shutdown asks every run to stop and be released (`release_runs`), and its cancel relay asks for a
beat at once (BEAT_NOW_SIGNAL)."""

import logging
import os
import signal
import threading
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection

from background.process_thread import ProcessThread
from executions import transitions
from executions.clock import db_now
from executions.states import ExecutionState
from worker import log_capture
from worker.context import HandlerContext
from worker.outcomes import flush_outcomes, record_stop

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


def shutting_down() -> bool:
    """Whether this process (or the process it was forked from) began to shut down."""
    return _shutdown_grace is not None


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
            record_stop(ctx, beat.lease_token, beat.outcome)
            flush_outcomes(timeout=beat.grace)  # earlier runs' outcomes, not to be lost with us
        finally:
            os._exit(FORCED_EXIT_CODE)


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
