"""A worker process group in the registry (pools/registry.py): what it serves and can take.

The worker's main process registers once Celery is ready, reports its busy slots every
TICKWORK_WORKER_BEAT_SECONDS on a thread of its own (with its own database connection), and
deregisters the moment it begins to shut down: the dispatcher stops admitting work for its slots
at once, and the runs it holds are released by the shutdown itself (worker/tasks.py). A worker
that is killed just stops reporting, and is offline after TICKWORK_WORKER_OFFLINE_SECONDS."""

import logging
import os
import socket
import threading
import time

from billiard.process import active_children
from celery.signals import task_received
from celery.worker import state as celery_state
from django.conf import settings
from django.db import close_old_connections, connection

from background.publisher import BATCH_TASK_NAME
from executions.clock import db_now
from jobs.registry import queue_name
from pools import registry

logger = logging.getLogger(__name__)
QUEUE_PREFIX = queue_name("")
# The most pids a worker's row keeps: a pool that replaces its processes often (max tasks per
# child) stops adding after this; the dashboard then misses the newest ones' runs in its counts.
MAX_PIDS = 1000


class Registration(threading.Thread):
    def __init__(self, *, pools: list[str], slots: int) -> None:
        super().__init__(name="registration", daemon=True)
        self.hostname, self.pid = socket.gethostname(), os.getpid()
        self.pools, self.slots = pools, slots
        self.row: int | None = None
        self.stopping = threading.Event()
        self.last = (time.monotonic(), _processed())  # for the rate: when, and how many taken
        self.pids: set[int] = {self.pid}  # every process of it so far: pool processes are replaced

    def run(self) -> None:
        while True:
            try:
                self._report()
            except Exception:  # the database is away: try again at the next beat
                logger.warning("could not report this worker to the registry; trying again", exc_info=True)
                close_old_connections()
            if self.stopping.wait(settings.TICKWORK_WORKER_BEAT_SECONDS):
                break
        try:
            if self.row is not None:
                registry.deregister(worker_id=self.row, now=db_now())
                logger.info("deregistered from pools %s", ", ".join(self.pools))
        except Exception:
            logger.warning("could not deregister; the registry counts this worker offline soon", exc_info=True)
        finally:
            connection.close()

    def _report(self) -> None:
        now = db_now()
        at, processed = time.monotonic(), _processed()
        rate = (processed - self.last[1]) / max(at - self.last[0], 1e-3)
        self.last = (at, processed)
        seen = len(self.pids)
        if len(self.pids) < MAX_PIDS:
            self.pids.update(child.pid for child in active_children() if child.pid is not None)
        pids = sorted(self.pids) if len(self.pids) != seen else None
        if self.row is not None and registry.beat(
            worker_id=self.row, busy=_busy(), processed=processed, rate=rate, now=now, pids=pids
        ):
            return
        self.row = registry.register(
            hostname=self.hostname, pid=self.pid, pools=self.pools, slots=self.slots, now=now, pids=sorted(self.pids)
        )
        logger.info("registered for pools %s with %d slots", ", ".join(self.pools), self.slots)

    def stop(self) -> None:
        """Safe in a signal handler: it only sets an event; the thread deregisters."""
        self.stopping.set()


def _busy() -> int:
    # Celery's own count of the task requests its pool is running.
    return len(celery_state.active_requests)


def _processed() -> int:
    # Runs taken since the worker started: Celery's own count of the task requests, plus the runs
    # beyond the first that batches carried (the dispatcher's buffer follows the runs' rate).
    return celery_state.all_total_count[0] + _batched[0]


_batched = [0]


@task_received.connect
def _count_batch(request, **kwargs) -> None:
    # In the main process, as the message is received: its body is decoded already.
    if request.name == BATCH_TASK_NAME:
        _batched[0] += len(request.args[0]) - 1


_registration: Registration | None = None


def start(consumer) -> None:
    """From Celery's worker_ready: register with the pools this worker consumes."""
    global _registration
    queues = [q.name for q in consumer.task_consumer.queues]
    pools = sorted(q[len(QUEUE_PREFIX) :] for q in queues if q.startswith(QUEUE_PREFIX))
    if not pools:
        return  # not a Tickwork worker (a benchmark's baseline, say)
    _registration = Registration(pools=pools, slots=consumer.controller.concurrency)
    _registration.start()


def stop(wait: float = 0.0) -> None:
    if _registration is not None:
        _registration.stop()
        if wait:
            _registration.join(wait)
