"""Waking sleeping dispatchers when work becomes due sooner than they planned to look.

On PostgreSQL, NOTIFY is transactional: sent inside the creating transaction, it is delivered
only if and when that transaction commits, so a dispatcher never wakes for a row it cannot see.
Elsewhere (SQLite) dispatchers simply poll.
"""

import contextlib
import logging
import select
from datetime import datetime

import psycopg
from django.db import connection

CHANNEL = "tickwork_due"
logger = logging.getLogger(__name__)


def notify(due: datetime) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, due.isoformat()])


class Listener:
    """A dedicated autocommit connection that LISTENs; `wait` returns early on a notification.
    If the connection drops (PostgreSQL restarted), `wait` sleeps instead and listens again on a
    new connection the next time: the dispatcher polls meanwhile and loses no work."""

    def __init__(self) -> None:
        self._params = connection.get_connection_params() if connection.vendor == "postgresql" else None
        self._conn: psycopg.Connection | None = None
        if self._params is not None:
            self._listen()

    def _listen(self) -> None:
        self._conn = psycopg.connect(**self._params, autocommit=True)
        self._conn.execute(f"LISTEN {CHANNEL}")

    def wait(self, seconds: float, sleep) -> bool:
        """Wait up to `seconds`; True if woken by a notification."""
        if self._params is None:
            sleep(seconds)
            return False
        if seconds <= 0:
            return False
        try:
            if self._conn is None:
                self._listen()
            if not select.select([self._conn.fileno()], [], [], seconds)[0]:
                return False
            # Drain: several creates may have notified; one wake-up serves them all. A dropped
            # connection is readable too: its farewell reads as no notification, and the next
            # read raises.
            return sum(1 for _ in self._conn.notifies(timeout=0)) > 0
        except psycopg.Error as exc:
            logger.warning("listening for due work failed (%s); polling until it can listen again", exc)
            self.close()
            sleep(seconds)
            return False

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
