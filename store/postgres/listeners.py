"""PostgreSQL's listeners: LISTEN on a dedicated connection for the NOTIFYs the store sends
with a transaction (due work for dispatchers, cancel requests for workers)."""

import contextlib
import logging
import select
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

import psycopg

from store.interface import CancelListener, DueListener

CHANNEL = "tickwork_due"


# Its payload: the worker id ("host:pid") of a run asked to cancel.
CANCEL_CHANNEL = "tickwork_cancel"


logger = logging.getLogger(__name__)


# What a notification that cannot be read counts as: due at once.
ALREADY_DUE = datetime(1970, 1, 1, tzinfo=UTC)


def _due(payload: str) -> datetime:
    """The due time a notification carries (not a time we sent: due at once)."""
    try:
        due = datetime.fromisoformat(payload)
    except ValueError:
        return ALREADY_DUE
    return due if due.tzinfo is not None else ALREADY_DUE


class _Listening:
    """A dedicated autocommit connection that LISTENs on `channel`. If it cannot listen
    (PostgreSQL is down or restarting, at start or later), a wait sleeps instead and tries again,
    at once the first time and then after a pause that doubles with each failure, up to
    RETRY_MAX_SECONDS, with one warning per try. Never raises: a role started before the database
    waits for it like every other role, instead of exiting. A notification sent while it is not
    listening is lost: each listener has a fallback (the dispatcher polls, a worker heartbeats)."""

    RETRY_MAX_SECONDS = 30.0
    channel: ClassVar[str]
    purpose: ClassVar[str]  # for the warning: "listening for <purpose> failed"

    def __init__(self, params: dict[str, Any]) -> None:
        self._params = params
        self._conn: psycopg.Connection | None = None
        self._failures = 0
        self._retry_at = float("-inf")  # monotonic
        # Listening from the start: a notification sent before the first wait is not missed.
        self._listen()

    def _listen(self) -> bool:
        """Listen on a new connection, unless the last failure's pause is not over. Whether it listens."""
        if time.monotonic() < self._retry_at:
            return False
        try:
            self._conn = psycopg.connect(**self._params, autocommit=True)
            self._conn.execute(f"LISTEN {self.channel}")
        except psycopg.Error as exc:
            self._failed(exc)
            return False
        self._failures = 0
        return True

    def _failed(self, exc: psycopg.Error) -> None:
        self.close()
        # The first try again is at once (a dropped connection, the database is up), then slower.
        pause = min(self.RETRY_MAX_SECONDS, 2.0 ** (self._failures - 1)) if self._failures else 0.0
        self._failures += 1
        self._retry_at = time.monotonic() + pause
        logger.warning(
            "listening for %s failed (%s); polling until it can listen again (in %.0fs)",
            self.purpose,
            str(exc).strip().split("\n", 1)[0],
            pause,
        )

    def _payloads(self, seconds: float, sleep: Callable[[float], Any]) -> list[str]:
        """The payloads of the notifications that came within `seconds` (all that had come by the
        first); none if the wait passed without one, or if it could not listen (then it sleeps)."""
        if seconds <= 0:
            return []
        if self._conn is None and not self._listen():
            sleep(seconds)
            return []
        assert self._conn is not None
        try:
            if not select.select([self._conn.fileno()], [], [], seconds)[0]:
                return []
            # Drain: several may have notified; one wake-up serves them all. A dropped connection
            # is readable too: its farewell reads as no notification, and the next read raises.
            return [n.payload for n in self._conn.notifies(timeout=0)]
        except psycopg.Error as exc:
            self._failed(exc)
            sleep(seconds)
            return []

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None


class Listener(_Listening, DueListener):
    """Wakes a dispatcher: `wait` returns early on a notification of due work; the dispatcher
    polls while it cannot listen and loses no work."""

    channel = CHANNEL
    purpose = "due work"

    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> datetime | None:
        return min((_due(payload) for payload in self._payloads(seconds, sleep)), default=None)


class CancelNotifications(_Listening, CancelListener):
    """Tells a worker's cancel relay which worker processes have a run just asked to cancel
    (`notify_cancel`). The relay picks out its own host's; the rest are other machines'."""

    channel = CANCEL_CHANNEL
    purpose = "cancel requests"

    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> list[str]:
        return self._payloads(seconds, sleep)
