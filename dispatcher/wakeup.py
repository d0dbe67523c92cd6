"""What a dispatcher knows of when work is next due, so that it sleeps until then.

Work made due sooner than it planned to look wakes it: the store sends a notification with the
transaction that made the work (`Store.notify_due`, NOTIFY on PostgreSQL, delivered only if and
when that transaction commits) and the dispatcher's `DueListener` hears it. Where there is no
such signal (the embedded default) dispatchers poll.
"""

import time
from datetime import datetime


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
        # Never below zero: a due time or a poll that passed while the claim ran means now.
        return max(0.0, ahead if due is None else min(ahead, (due - now).total_seconds()))
