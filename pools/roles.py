"""The registry of the scheduler's own roles: each dispatcher and sweeper says it is alive each
time it finishes a unit of work (at most once a second), and what failed when one fails.
`/v1/health` answers 503 when no dispatcher has been seen within a bound, and the dashboard shows
them; a dispatcher that runs but fails every claim stops being seen, so it is not "healthy".

Times come from the caller's clock (the database's, executions.clock.db_now), as the worker
registry's do. A write that fails (the database is down: that is why the role is failing) is
dropped: the registry is what the role says when it can, never a reason for it to fail."""

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError
from django.db.models import QuerySet

from pools.models import Role

logger = logging.getLogger(__name__)
# The least time between two writes of one role's row: a busy dispatcher finishes many units a second.
WRITE_EVERY_SECONDS = 1.0


class RoleBeat:
    """One role process's row: `started`, then `ok` or `failed` after each unit of work, `stopped`."""

    def __init__(self, kind: str, *, clock: Callable[[], datetime]) -> None:
        self.kind, self.clock = kind, clock
        self.row_id: int | None = None
        self._written = float("-inf")  # monotonic time of the last write

    def started(self) -> None:
        def create(now: datetime) -> None:
            row = Role.objects.create(
                kind=self.kind, hostname=socket.gethostname(), pid=os.getpid(), started_at=now, last_seen_at=now
            )
            self.row_id = row.pk

        self._write(create)

    def ok(self) -> None:
        if self.row_id is None:
            self.started()  # it could not register at its start: the database was down
        elif time.monotonic() - self._written >= WRITE_EVERY_SECONDS:
            self._write(lambda now: self._rows().update(last_seen_at=now))

    def failed(self, exc: BaseException) -> None:
        text = str(exc).strip().split("\n", 1)[0]
        error = f"{exc.__class__.__name__}: {text}"[:500]
        if self.row_id is not None:
            self._write(lambda now: self._rows().update(last_error=error, last_error_at=now))

    def stopped(self) -> None:
        if self.row_id is not None:
            self._write(lambda now: self._rows().update(stopped_at=now))

    def _rows(self) -> QuerySet[Role]:
        assert self.row_id is not None
        return Role.objects.filter(pk=self.row_id)

    def _write(self, write: Callable[[datetime], object]) -> None:
        try:
            write(self.clock())
        except DatabaseError as exc:
            logger.debug("%s registry not written: %s", self.kind, exc)
            return
        self._written = time.monotonic()


@dataclass(frozen=True)
class Seen:
    """A role's processes as health and the dashboard show them."""

    kind: str
    processes: list[Role]  # not stopped, newest seen first
    last_seen_at: datetime | None  # the newest of them


def seen(kind: str, *, now: datetime, within: timedelta) -> Seen:
    """The processes of `kind` that have not stopped and were seen within `within` before `now`
    (ten times that, for the ones to show as lately gone), newest first."""
    rows = list(
        Role.objects.filter(kind=kind, stopped_at__isnull=True, last_seen_at__gte=now - 10 * within).order_by(
            "-last_seen_at"
        )[:20]
    )
    return Seen(kind, rows, rows[0].last_seen_at if rows else None)


def prune(*, now: datetime, older_than: timedelta) -> int:
    """Forget role processes not seen for `older_than`. Returns how many."""
    deleted, _ = Role.objects.filter(last_seen_at__lt=now - older_than).delete()
    return deleted
