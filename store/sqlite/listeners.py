"""The embedded default's listeners: it has no notifications, so a due listener sleeps and a
cancel listener polls."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from store import tables
from store.interface import CancelListener, DueListener
from store.tables import RUNNING


class Sleeper(DueListener):
    """Waits for due-work notifications; here there are none, so a wait is a sleep."""

    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> datetime | None:
        """Wait up to `seconds`. Returns the earliest due time among the notifications that came,
        or None if none did (the whole wait passed)."""
        sleep(seconds)
        return None

    def close(self) -> None:
        pass


class CancelPoller(CancelListener):
    """Finds the worker processes on one host that have a run with a new cancel request, by
    polling: the embedded default is one machine and one SQLite file, and the query reads only
    the RUNNING rows. Each request is reported once (the heartbeat is the fallback should its
    signal be missed)."""

    POLL_SECONDS = 0.3

    def __init__(self, *, host: str) -> None:
        self._prefix = f"{host}:"
        self._reported: set[Any] = set()  # execution ids already reported and still RUNNING

    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> list[str]:
        """Wait up to `seconds` (`sleep` waits, and may return early). Returns the worker ids
        ("host:pid") of the runs asked to cancel since the last call, possibly none."""
        sleep(min(seconds, self.POLL_SECONDS))
        asked = dict(
            tables.execution()
            ._default_manager.filter(
                state=RUNNING, cancel_requested_at__isnull=False, worker_id__startswith=self._prefix
            )
            .values_list("id", "worker_id")
        )
        new = {worker_id for execution_id, worker_id in asked.items() if execution_id not in self._reported}
        self._reported = set(asked)
        return sorted(new)

    def close(self) -> None:
        pass
