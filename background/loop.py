"""The shared shape of a long-running role: run a unit of work, sleep, stop cleanly on a signal;
and the loop of the roles made of background services (`serve_services`: the sweeper, the alerter)."""

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from django.db import InterfaceError, OperationalError, close_old_connections

from background.service import Service, run_pass
from pools.roles import RoleBeat

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


# A failed unit of work is tried again after a pause that doubles with each failure in a row:
# soon after a blip, and no busy loop while the database is down for a while.
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 8.0
# While the database stays unreachable, how often it is said again in the log.
REPEAT_LOG_SECONDS = 60.0


def run_forever(*, name: str, step: Callable[[], float], stop: StopFlag, beat: RoleBeat | None = None) -> None:
    """Call `step` until stopped; `step` does one unit of work and returns how long to wait
    (it may wait itself and return 0). A failure is logged and retried after a growing pause, so
    a role started before the database, or outliving its restart, waits for it and carries on.
    An unreachable database is one line in the log when it starts, one a minute while it lasts,
    and one when it ends; not a traceback per try. With `beat`, the role's row in the registry
    (pools/roles.py) says after each unit of work that it was done, or what failed."""
    logger.info("%s started", name)
    beat = beat or _NoBeat()
    beat.started()
    failures, down_since, logged_at = 0, 0.0, float("-inf")
    while not stop.stopping:
        began = time.monotonic()
        try:
            delay = step()
        except (OperationalError, InterfaceError) as exc:
            beat.failed(exc)
            close_old_connections()
            delay = _pause(failures)
            now = time.monotonic()
            if not failures:
                # From the try that failed, not its end: with the connection pool, a first try
                # waits for a connection (DATABASE_POOL_TIMEOUT, 10 s) before it fails.
                down_since = began
            if now - logged_at >= REPEAT_LOG_SECONDS:
                logged_at = now
                logger.warning(
                    "%s: waiting for the database (unavailable for %.0fs): %s",
                    name,
                    now - down_since,
                    str(exc).strip().split("\n", 1)[0] or exc.__class__.__name__,
                )
            failures += 1
        except Exception as exc:
            logger.exception("%s: unit of work failed; retrying", name)
            beat.failed(exc)
            close_old_connections()
            delay = _pause(failures)
            failures += 1
        else:
            beat.ok()
            if failures:
                logger.info("%s: working again after %d failed tries", name, failures)
            failures, logged_at = 0, float("-inf")
        if delay > 0:
            stop.event.wait(delay)
    beat.stopped()
    logger.info("%s stopped", name)


def serve_services(
    *,
    name: str,
    services: Sequence[Service],
    stop: StopFlag,
    clock: Callable[[], datetime],
    interval: float,
    again_at: int | None,
    log_as: str,
    beat: RoleBeat | None = None,
) -> None:
    """Run `services` in order, each unit of work at the time `clock` says (the database's), until
    `stop`: at once again after a pass whose work reached `again_at` (a full batch: there is
    more), else every `interval` seconds. A pass that did any work says so in one line,
    `<log_as>: <service>(<count>=n, …) …`; a quiet pass says nothing."""

    def step() -> float:
        close_old_connections()
        done = run_pass(services, now=clock())
        if done.work():
            logger.info("%s: %s", log_as, done)
        return 0 if again_at is not None and done.work() >= again_at else interval

    run_forever(name=name, step=step, stop=stop, beat=beat)


class _NoBeat(RoleBeat):
    """No registry row: the loop of a role that is not a dispatcher or sweeper (or a test's)."""

    def __init__(self) -> None:
        super().__init__("", clock=lambda: datetime.now(UTC))

    def _write(self, write: Callable[[datetime], object]) -> None:
        pass


def _pause(failures: int) -> float:
    return min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2**failures)
