"""The workers' side of the named rate limits (pools/rate_limits.py): the exact guard on starts.

The claim paces admission (scheduling/rate_limiting.py), but what it admits at a steady pace can
still start bunched: a broker delivers late, a worker is busy, a message is published again. So
a run held to a limit starts only in a transaction that also counts its start, at its start
time, against the limit's start clock (one conditional UPDATE of the limit's row, on which such
starts take turns): `started_at` never runs ahead of the limit, whatever the delivery did. A
start that does not conform yet is rolled back and tried again when it will (the run stays
QUEUED meanwhile, its message held by this worker).

Where no limit is defined (the process's view of them, read every few seconds) a start is the
one statement it always was.
"""

import logging
import time
from collections.abc import Callable
from datetime import datetime

from django.db import transaction

from executions.clock import db_now
from pools import rate_limits
from scheduling import runs
from store import Started, store

logger = logging.getLogger(__name__)

# The longest one wait for a start's turn; a longer one is waited for in several.
MAX_WAIT_SECONDS = 5.0


class _NotYet(Exception):
    def __init__(self, when: float) -> None:
        self.when = when


def start(start_at: Callable[[datetime], Started | None], *, stopping: Callable[[], bool]) -> Started | None:
    """`start_at(now)`, the run's QUEUED → RUNNING at `now`, within its rate limit: returns the
    started run, or None when it could not be started (or `stopping` came while it waited)."""
    if not rate_limits.definitions.get():
        return start_at(db_now())
    while True:
        now, asked = db_now(), time.monotonic()
        try:
            with transaction.atomic():
                started = start_at(now)
                if started is None:
                    return None
                limit = rate_limits.definitions.get().get(_limit_name(started))
                when = store().take_start(limit.name, now.timestamp()) if limit is not None else None
                if when is not None:
                    raise _NotYet(when)  # rolls the start back: it stays QUEUED
                return started
        except _NotYet as wait:
            # From now, not from when the attempt began: with burst 1, each wait that overshot by
            # the attempt's own time (a round trip, a turn on the limit's row) slowed the rate.
            late = time.monotonic() - asked
            seconds = min(max(wait.when - now.timestamp() - late, 0.001), MAX_WAIT_SECONDS)
            logger.debug("a start waits %.3f s for its rate limit", seconds)
            time.sleep(seconds)
            if stopping():
                return None


def _limit_name(started: Started) -> str:
    if started.run_id is None:
        return rate_limits.name_of(started.rate_limit, started.handler)
    return rate_limits.name_of_step(runs.step_spec(run_id=started.run_id, name=started.step).get("target") or {})
