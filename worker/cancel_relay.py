"""The cancel relay: a thread of a Celery worker's main process that passes a cancel request on
to the process of this worker that runs the execution, at once.

A cancel of a RUNNING execution is a durable request in its row (`transitions.request_cancel`),
which the process running it reads with its next heartbeat, up to lease/3 later. The relay hears
of the request as it commits (`store().cancel_listener()`: NOTIFY on PostgreSQL, a poll of the
RUNNING rows on the embedded default) and sends that process BEAT_NOW_SIGNAL; the process's
heartbeat thread then beats at once, reads the request and stops the handler as it would have
at its next beat. Nothing depends on the relay: should it miss a request (the listener was
reconnecting, the signal found no handler), the heartbeat reads it in its turn.

One relay per worker, in the main process, because only that process knows its pool's processes
(`billiard.process.active_children`): worker ids name the process ("host:pid").
"""

import logging
import os
import socket
import threading
from collections.abc import Iterable

from billiard.process import active_children
from django.db import connection

from store import store
from worker.heartbeats import BEAT_NOW_SIGNAL, Heartbeats

logger = logging.getLogger(__name__)


def pid_to_signal(worker_id: str, *, host: str, own: int, children: Iterable[int]) -> int | None:
    """The pid to signal for a cancel request of the run of `worker_id` ("host:pid"): that pid
    when it is this host's and this worker's (its main process `own` or one of its `children`),
    else None (another worker's, on this host or another)."""
    worker_host, _, pid = worker_id.rpartition(":")
    if worker_host != host or not pid.isdigit():
        return None
    return int(pid) if int(pid) == own or int(pid) in children else None


class CancelRelay(threading.Thread):
    # How long one wait lasts at most: how soon the thread notices it is asked to stop.
    WAIT_SECONDS = 1.0

    def __init__(self) -> None:
        super().__init__(name="cancel-relay", daemon=True)
        self.stopping = threading.Event()
        self.host = socket.gethostname()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        listener = store().cancel_listener(host=self.host)
        try:
            while not self.stopping.is_set():
                try:
                    for worker_id in listener.wait(self.WAIT_SECONDS, self.stopping.wait):
                        self.relay(worker_id)
                except Exception:  # a database blip must not end the relay: the heartbeats cover it
                    logger.exception("cancel relay: looking for cancel requests failed; trying again")
                    connection.close()
                    self.stopping.wait(self.WAIT_SECONDS)
        finally:
            listener.close()
            connection.close()

    def relay(self, worker_id: str) -> None:
        own = os.getpid()
        children = [child.pid for child in active_children() if child.pid is not None]
        pid = pid_to_signal(worker_id, host=self.host, own=own, children=children)
        if pid is None:
            return
        logger.info("cancel requested for a run of %s: asking it to beat now", worker_id)
        if pid == own:  # the solo and threads pools run tasks in this process
            heartbeats = Heartbeats.current()
            if heartbeats is not None:
                heartbeats.beat_now()
            return
        try:
            os.kill(pid, BEAT_NOW_SIGNAL)
        except ProcessLookupError:
            pass  # it ended meanwhile; its run's lease expires and the sweeper settles it


_relay: CancelRelay | None = None


def start() -> None:
    """Start this process's relay (Celery's worker_ready, in the worker's main process)."""
    global _relay
    if _relay is None or not _relay.is_alive():
        _relay = CancelRelay()
        _relay.start()


def stop() -> None:
    """Ask the relay to stop; it ends within WAIT_SECONDS (a daemon thread: nothing waits for it)."""
    if _relay is not None:
        _relay.stop()
