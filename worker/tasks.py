import os
import signal
import threading
from typing import Any

from billiard.process import active_children
from celery import shared_task
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from background.publisher import BATCH_TASK_NAME, TASK_NAME
from telemetry import tracing
from worker import batches, cancel_relay, heartbeats, outcomes, registration, runner

# How long a worker process that is ending waits for its queued outcomes to be recorded.
OUTCOME_FLUSH_SECONDS = 30


@shared_task(name=TASK_NAME, ignore_result=True)
def run_execution(execution_id: str, lease_token: int) -> None:
    """Thin on purpose: the row, not the message, decides whether and what to run."""
    runner.run(execution_id=execution_id, lease_token=lease_token, defer_success=True)


@shared_task(name=BATCH_TASK_NAME, ignore_result=True)
def run_executions(runs: list, pool: str, priority: int) -> None:
    """Several runs of one pool, [[execution id, lease token], …], run in this slot one after
    another (worker/batches.py); `pool` and `priority` are theirs, for what the slot hands back."""
    batches.run(runs, pool=pool, priority=priority)


@worker_process_shutdown.connect  # a prefork child that ends: max tasks, warm shutdown
@worker_shutdown.connect  # the solo and threads pools run tasks in the main process
def record_queued_outcomes(**kwargs) -> None:
    if not outcomes.flush_outcomes(timeout=OUTCOME_FLUSH_SECONDS):
        outcomes.logger.error("outcomes still queued at exit; their runs will be retried when their leases expire")


@worker_init.connect
def _trace(**kwargs) -> None:
    """Tracing, if the OTEL_* variables ask for it (telemetry/tracing.py), set up in the main
    process before its pool forks: the SDK starts its export thread again in each pool process."""
    tracing.setup("worker")


@worker_process_shutdown.connect  # a pool process ends with os._exit: nothing at exit runs
@worker_shutdown.connect
def _flush_traces(**kwargs) -> None:
    tracing.flush()


@worker_ready.connect
def register_worker(sender, **kwargs) -> None:
    registration.start(sender)


@worker_shutdown.connect
def deregister_worker(**kwargs) -> None:
    registration.stop(wait=2.0)  # done already, if the shutdown began with a signal


@worker_shutting_down.connect
def release_on_shutdown(**kwargs) -> None:
    """SIGTERM (or Ctrl-C) reached the worker's main process, which now waits for its running tasks
    (Celery's warm shutdown). The runs it has in hand are asked to stop and released back to
    PENDING at once: this process's own (solo and threads pools), and those of its prefork pool
    processes, which are sent SIGTERM as systemd would (Kubernetes signals only the main process).
    Its slots leave the registry at once, so nothing more is admitted for them."""
    registration.stop()
    heartbeats.release_runs()
    for child in active_children():
        if child.pid is None:  # not started
            continue
        try:
            os.kill(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


@worker_init.connect  # the main process, before its pool processes fork: they inherit the handler
@worker_process_init.connect  # a pool process started otherwise
def _beat_now_on_signal(**kwargs) -> None:
    """The cancel relay's signal ends a process that has no handler for it: every process it may
    signal has one before the relay starts (worker_ready). billiard's blocking pool (the
    filesystem broker's) replaces it in its pool processes after worker_process_init; each task
    installs it again (`_task_started`) before its run is RUNNING, the only time the relay
    signals that process."""
    heartbeats.install_beat_now_signal()


@worker_ready.connect
def _start_cancel_relay(**kwargs) -> None:
    cancel_relay.start()


@worker_shutting_down.connect
@worker_shutdown.connect
def _stop_cancel_relay(**kwargs) -> None:
    cancel_relay.stop()


class _SigtermDuringRun:
    """SIGTERM in a process that runs tasks on its main thread (a prefork pool process; the solo
    pool). billiard's handler raises SystemExit wherever the pool process is, which would cut a
    handler short and leave its run RUNNING until the lease expires (then FAILED_WORKER_LOST and
    a retry). While a task runs, SIGTERM instead asks its run to stop and be released
    (heartbeats.release_runs); when the task is over, the process's own handler takes the signal as it
    would have (the pool process exits; the solo worker begins its warm shutdown).

    Installed at a process's first task, because billiard installs its handler after Celery's
    worker_process_init."""

    def __init__(self) -> None:
        self.pid = 0
        self.previous: Any = None  # the SIGTERM handler this one replaced
        self.running = False
        self.pending: tuple | None = None  # the signal that came while a task ran

    def task_started(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # the threads pool: the main process's warm shutdown releases its runs
        if self.pid != os.getpid():
            self.pid, self.pending = os.getpid(), None
            self.previous = signal.signal(signal.SIGTERM, self._handle)
        self.running = True

    def task_ended(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self.pid != os.getpid():
            return
        self.running = False
        if self.pending is not None:
            self._pass_on(*self.pending)

    def _handle(self, signum, frame) -> None:
        if self.running:
            if self.pending is None:
                self.pending = (signum, frame)
                heartbeats.release_runs()
            return
        self._pass_on(signum, frame)

    def _pass_on(self, signum, frame) -> None:
        previous = self.previous
        try:
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.raise_signal(signal.SIGTERM)
        finally:
            # The process is on its way out; a second SIGTERM (the main process passes one on,
            # as systemd may have sent one already) must not cut its outcome flush short.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)


_sigterm = _SigtermDuringRun()


@task_prerun.connect
def _task_started(**kwargs) -> None:
    _sigterm.task_started()
    heartbeats.install_beat_now_signal()


@task_postrun.connect
def _task_ended(**kwargs) -> None:
    _sigterm.task_ended()
