"""Waking sleeping dispatchers when work becomes due sooner than they planned to look.

On PostgreSQL, NOTIFY is transactional: sent inside the creating transaction, it is delivered
only if and when that transaction commits, so a dispatcher never wakes for a row it cannot see.
Elsewhere (SQLite) dispatchers simply poll.
"""

import select
from datetime import datetime

import psycopg
from django.db import connection

CHANNEL = "tickwork_due"


def notify(due: datetime) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, due.isoformat()])


class Listener:
    """A dedicated autocommit connection that LISTENs; `wait` returns early on a notification."""

    def __init__(self) -> None:
        self._conn: psycopg.Connection | None = None
        if connection.vendor == "postgresql":
            params = connection.get_connection_params()
            self._conn = psycopg.connect(**params, autocommit=True)
            self._conn.execute(f"LISTEN {CHANNEL}")

    def wait(self, seconds: float, sleep) -> bool:
        """Wait up to `seconds`; True if woken by a notification."""
        if self._conn is None:
            sleep(seconds)
            return False
        if seconds <= 0:
            return False
        woken = select.select([self._conn.fileno()], [], [], seconds)[0]
        if woken:
            # Drain: several creates may have notified; one wake-up serves them all.
            for _ in self._conn.notifies(timeout=0):
                pass
        return bool(woken)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
