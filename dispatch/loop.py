"""The shared shape of a long-running role: run a unit of work, sleep, stop cleanly on a signal."""

import logging
import signal
import threading
from collections.abc import Callable

from django.db import close_old_connections

logger = logging.getLogger(__name__)


class StopFlag:
    """Set by SIGINT/SIGTERM; the loop finishes its current unit of work and exits."""

    def __init__(self) -> None:
        self.event = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        logger.info("received %s; stopping after the current batch", signal.Signals(signum).name)
        self.event.set()

    @property
    def stopping(self) -> bool:
        return self.event.is_set()


def run_forever(*, name: str, step: Callable[[], float], stop: StopFlag) -> None:
    """Call `step` until stopped; `step` does one unit of work and returns how long to wait
    (it may wait itself and return 0). An error is logged and retried after a pause, so a
    database restart does not kill the role."""
    logger.info("%s started", name)
    while not stop.stopping:
        try:
            delay = step()
        except Exception:
            logger.exception("%s: unit of work failed; retrying", name)
            close_old_connections()
            delay = 1.0
        if delay > 0:
            stop.event.wait(delay)
    logger.info("%s stopped", name)
