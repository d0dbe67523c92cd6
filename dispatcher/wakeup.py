"""Waking sleeping dispatchers when work becomes due sooner than they planned to look.

On PostgreSQL, NOTIFY is transactional: sent inside the creating transaction, it is delivered
only if and when that transaction commits, so a dispatcher never wakes for a row it cannot see.
Elsewhere (SQLite) dispatchers simply poll.
"""

import contextlib
import logging
import select
import time
from datetime import datetime

import psycopg
from django.db import connection

from executions.clock import db_now

CHANNEL = "tickwork_due"
logger = logging.getLogger(__name__)


def notify(due: datetime) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, due.isoformat()])


def _due(payload: str) -> datetime:
    """The due time a notification carries; one that cannot be read counts as due now."""
    try:
        due = datetime.fromisoformat(payload)
    except ValueError:
        due = None
    return due if due is not None and due.tzinfo is not None else db_now()


class DueClock:
    """What a dispatcher knows of the next due time, so that it need not ask the database after
    every claim: a stream of creates wakes it hundreds of times a second, and the peek was a third
    of each wake-up's statements. Two sources: the database's answer (`asked`), and the due times
    that notifications carried since (`heard`). A claim takes whatever was due by its time, so it
    consumes what was heard up to then; the database is asked again (`stale`) only when the time
    it gave has come (that work is claimed now, and what follows it is unknown), when the
    dispatcher's own claim made new cron fires, or `poll` seconds after it was last asked, so that
    work made without a notification (another dispatcher's next fires) is seen within `poll`, as
    it was when every loop asked."""

    def __init__(self, *, poll: float) -> None:
        self.poll = poll
        self.asked_due: datetime | None = None
        self.heard_due: datetime | None = None
        self.asked_at = float("-inf")  # monotonic

    @property
    def due(self) -> datetime | None:
        return min((d for d in (self.asked_due, self.heard_due) if d is not None), default=None)

    def stale(self, now: datetime) -> bool:
        return (self.asked_due is not None and self.asked_due <= now) or time.monotonic() - self.asked_at >= self.poll

    def asked(self, due: datetime | None) -> None:
        """The database's answer: the earliest due time now (None: nothing is pending). It covers
        what was heard before: a notification is delivered only once its rows are committed."""
        self.asked_due, self.heard_due, self.asked_at = due, None, time.monotonic()

    def heard(self, due: datetime) -> None:
        """A notification: something is due at `due`."""
        self.heard_due = due if self.heard_due is None else min(self.heard_due, due)

    def claimed(self, now: datetime) -> None:
        """A claim at `now` that was not full took everything due by then that no other
        dispatcher holds: what was heard of up to `now` is done."""
        if self.heard_due is not None and self.heard_due <= now:
            self.heard_due = None

    def forget(self) -> None:
        """Ask next time, whatever is known."""
        self.asked_at = float("-inf")

    def wait_seconds(self, now: datetime) -> float:
        """How long to sleep before the next claim: until the earliest due time, or the poll."""
        ahead = self.poll - (time.monotonic() - self.asked_at)
        due = self.due
        return ahead if due is None else min(ahead, (due - now).total_seconds())


class Listener:
    """A dedicated autocommit connection that LISTENs; `wait` returns early on a notification.
    If it cannot listen (PostgreSQL is down or restarting, at start or later), `wait` sleeps
    instead and tries again, at once the first time and then after a pause that doubles with
    each failure, up to RETRY_MAX_SECONDS, with one warning per try: the dispatcher polls
    meanwhile and loses no work. Never raises: a dispatcher started before the database waits
    for it like every other role, instead of exiting."""

    RETRY_MAX_SECONDS = 30.0

    def __init__(self) -> None:
        self._params = connection.get_connection_params() if connection.vendor == "postgresql" else None
        self._conn: psycopg.Connection | None = None
        self._failures = 0
        self._retry_at = float("-inf")  # monotonic
        if self._params is not None:
            # Listening from the start: a notification sent before the first wait is not missed.
            self._listen()

    def _listen(self) -> bool:
        """Listen on a new connection, unless the last failure's pause is not over. Whether it listens."""
        if time.monotonic() < self._retry_at:
            return False
        try:
            self._conn = psycopg.connect(**self._params, autocommit=True)
            self._conn.execute(f"LISTEN {CHANNEL}")
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
            "listening for due work failed (%s); polling until it can listen again (in %.0fs)",
            str(exc).strip().split("\n", 1)[0],
            pause,
        )

    def wait(self, seconds: float, sleep) -> datetime | None:
        """Wait up to `seconds`. Returns the earliest due time among the notifications that came,
        or None if none did (the whole wait passed)."""
        if self._params is None:
            sleep(seconds)
            return None
        if seconds <= 0:
            return None
        if self._conn is None and not self._listen():
            sleep(seconds)
            return None
        try:
            if not select.select([self._conn.fileno()], [], [], seconds)[0]:
                return None
            # Drain: several creates may have notified; one wake-up serves them all. A dropped
            # connection is readable too: its farewell reads as no notification, and the next
            # read raises.
            return min((_due(n.payload) for n in self._conn.notifies(timeout=0)), default=None)
        except psycopg.Error as exc:
            self._failed(exc)
            sleep(seconds)
            return None

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
