"""The database's clock: the one clock that every time deciding correctness is read from.

A time is written by one process and compared by another, on other hosts: the API writes a
job's `available_at` and the dispatcher claims it when due; a worker writes `lease_expires_at`
and the sweeper reclaims the run once it has passed; the events of one run are written by the
API, a dispatcher and a worker. With each host's own clock, a worker whose clock ran 25 s behind
had its live run reclaimed 5 s after it started, and a dispatcher with a fast clock fired jobs
early. Every role therefore takes `now` from `db_now()`, the database's clock.

How, without a round trip per operation: the statements take `now` as a parameter (one value for
all the writes of a transaction, and tests control time), so asking the database for it each
time would add a statement to each of a worker's two per run. Instead each process measures once
where the database's clock stands against its own monotonic clock (`SELECT clock_timestamp()`,
placed at the midpoint of the round trip: off by at most half of it, well under a millisecond on
a LAN) and from then on reads the database's time off the monotonic clock, measuring again every
`REFRESH_SECONDS`. The monotonic clock is not moved when the host's wall clock is wrong or is
stepped, and between two measurements it drifts from the database's by parts per million: a few
milliseconds at most, against leases and graces of seconds. One measurement serves the whole
process, all its threads, and the processes forked from it (the monotonic clock is the host's).

On SQLite the database is a file on this host, so its clock is the local one.
"""

import logging
import os
import time
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from store import store

# How long a measurement is trusted before it is taken again. One statement per process this
# often is nothing; it bounds the drift between the monotonic and the database's clock.
REFRESH_SECONDS = 60.0
# Readings per measurement; the one with the shortest round trip is kept.
READINGS = 3

# A host clock this far from the database's is worth a word to the operator: it no longer decides
# anything here, but the host's logs and anything else on it that trusts its clock are that far off.
SKEW_WARNING_SECONDS = 1.0

logger = logging.getLogger(__name__)
# (monotonic time, the database's time at that instant), or None before the first measurement.
_anchor: tuple[float, datetime] | None = None
_skew_reported_by: int | None = None  # the pid that said so: once per process


def db_now() -> datetime:
    """The database's current time (aware, UTC). Measures the clock, one statement, when the
    last measurement is older than REFRESH_SECONDS; otherwise reads no database."""
    if not store().remote_clock:
        return timezone.now()
    anchor = _anchor
    now = time.monotonic()
    if anchor is None or now - anchor[0] >= REFRESH_SECONDS:
        anchor = measure()
        now = time.monotonic()
    return anchor[1] + timedelta(seconds=now - anchor[0])


def measure() -> tuple[float, datetime]:
    """Ask the database for its time now and anchor the process's reading of it.

    A reading is placed at the midpoint of its round trip, so it is off by up to half of it. The
    first may include opening the connection (tens of milliseconds on a busy host, enough to put
    one process's clock ahead of another's and a run's start before its claim), so of a few
    readings the one with the shortest round trip is kept, as NTP does."""
    global _anchor
    best: tuple[float, float, datetime] | None = None  # (round trip, midpoint, database time)
    for _ in range(READINGS):
        before = time.monotonic()
        db_time = store().measure_clock()
        after = time.monotonic()
        if best is None or after - before < best[0]:
            best = (after - before, (before + after) / 2, db_time)
    assert best is not None
    _anchor = (best[1], best[2])
    _report_skew((best[2] - datetime.now(UTC)).total_seconds())  # within a round trip: plenty here
    return _anchor


def _report_skew(seconds: float) -> None:
    global _skew_reported_by
    if abs(seconds) >= SKEW_WARNING_SECONDS and _skew_reported_by != os.getpid():
        _skew_reported_by = os.getpid()
        logger.warning(
            "this host's clock is %.1fs %s the database's; Tickwork uses the database's",
            abs(seconds),
            "behind" if seconds > 0 else "ahead of",
        )
