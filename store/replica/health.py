"""Whether the replica may serve reads: it answers, it is a replica streaming from its primary,
and its replay is within the lag bound. Looked at once a second per web process at most, in a
thread of its own, never in a request's way (a replica that does not answer would hold the request
for a connection timeout); until the first look, reads go to the primary. Each change of answer is
one log line: "reads go to the primary: …" and "reads on the replica again"."""

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import psycopg
from django.conf import settings
from django.db import connections

from store.replica.routing import REPLICA

logger = logging.getLogger(__name__)

# A replica's answer in one statement. Caught up (all received WAL replayed) is no lag, whatever
# the age of the last transaction replayed (an idle primary commits nothing); behind, the lag is
# the age of the last transaction replayed (pg_last_xact_replay_timestamp), as PostgreSQL's docs
# measure it. A WAL receiver's row exists only while it runs: without one the replica is serving
# what it had when the primary went out of reach.
LAG = """
SELECT pg_is_in_recovery(),
       CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
            ELSE COALESCE(date_part('epoch', now() - pg_last_xact_replay_timestamp()), 'Infinity')
       END,
       EXISTS (SELECT FROM pg_stat_wal_receiver)
"""


# The most often a process looks (scheduler_project/replica.py holds a client's window to at
# least the lag bound plus this).
CHECK_SECONDS = 1.0


class Replay(NamedTuple):
    in_recovery: bool
    lag_seconds: float
    streaming: bool


def verdict(replay: Replay, *, max_lag: float) -> str | None:
    """Why the replica may not serve reads, or None when it may."""
    if not replay.in_recovery:
        # Promoted, or DATABASE_REPLICA_URL names a primary: its rows may part from DATABASE_URL's.
        return "it is not in recovery (not a replica)"
    if not replay.streaming:
        return "it is not streaming from the primary"
    if replay.lag_seconds > max_lag:
        return f"its replay is {replay.lag_seconds:.1f} s behind (bound {max_lag:g} s)"
    return None


class ReplicaHealth:
    """One web process's view of the replica. `probe` reads its `Replay` (it raises when the
    replica does not answer); `clock` is monotonic seconds."""

    def __init__(
        self,
        probe: Callable[[], Replay],
        *,
        max_lag: float,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self._max_lag = max_lag
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._checked_at = float("-inf")
        self._usable = False
        self._said: str | None = None  # the last line logged: None, "down" or "up"
        self.reason: str | None = "not looked at yet"  # why reads go to the primary (None: they do not)

    def usable(self) -> bool:
        """The last look's answer; starts the next look in the background when one is due."""
        if self._clock() - self._checked_at >= self._interval and self._lock.acquire(blocking=False):
            self._checked_at = self._clock()
            try:
                threading.Thread(target=self._check_holding_lock, name="tickwork-replica-lag", daemon=True).start()
            except RuntimeError:  # no thread to be had: the next request tries again
                self._lock.release()
        return self._usable

    def check(self) -> bool:
        """Look now, in this thread (after a read on the replica failed: whether it was the
        replica, and why, said in the one line)."""
        with self._lock:
            self._checked_at = self._clock()
            self._look()
        return self._usable

    def _check_holding_lock(self) -> None:
        try:
            self._look()
        finally:
            self._lock.release()

    def _look(self) -> None:
        try:
            replay = self._probe()
        except Exception as exc:  # unreachable, refused, restarting: whatever it is, not fit
            said = str(exc).strip()
            self._set(f"it does not answer: {said.splitlines()[0] if said else type(exc).__name__}")
            return
        self._set(verdict(replay, max_lag=self._max_lag))

    def _set(self, reason: str | None) -> None:
        self._usable, self.reason = reason is None, reason
        if reason is not None and self._said != "down":
            logger.warning("replica: reads go to the primary: %s", reason)
            self._said = "down"
        elif reason is None and self._said == "down":
            logger.info("replica: reads on the replica again")
            self._said = "up"
        elif reason is None:
            self._said = "up"


class Probe:
    """`ReplicaHealth`'s probe on PostgreSQL: the LAG statement on a connection of its own (not the
    pool's: a look must not wait for a pooled connection, nor take one from the requests)."""

    def __init__(self, params: dict[str, Any]) -> None:
        self._params = {
            **params,
            "connect_timeout": params.get("connect_timeout") or 2,
            "application_name": "tickwork replica health",
        }
        self._conn: psycopg.Connection | None = None

    def __call__(self) -> Replay:
        stale = self._conn is not None
        try:
            return self._read()
        except Exception:
            self.close()
            if not stale:
                raise
        # The connection kept from the last look broke (the replica restarted, or stopped): a
        # fresh one says which.
        try:
            return self._read()
        except Exception:
            self.close()
            raise

    def _read(self) -> Replay:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(**self._params, autocommit=True)
        row = self._conn.execute(LAG).fetchone()
        assert row is not None
        return Replay(bool(row[0]), float(row[1]), bool(row[2]))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


# scheduler_project/replica.py's name for the replica's pool (settings come before the apps).
POOL_NAME = "tickwork-replica"


class _PoolWarnings(logging.Filter):
    """psycopg_pool's warning at each failed try to connect to the replica: said once, as a change
    of the replica's health, instead of a few times a second."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"'{POOL_NAME}'" not in record.getMessage()


_health: ReplicaHealth | None = None
_made = threading.Lock()


def replica_health() -> ReplicaHealth:
    """This process's view of the replica, made at the first request that asks."""
    global _health
    if _health is None:
        with _made:
            if _health is None:
                logging.getLogger("psycopg.pool").addFilter(_PoolWarnings())
                params = connections[REPLICA].get_connection_params()
                _health = ReplicaHealth(
                    Probe(params), max_lag=settings.TICKWORK_REPLICA_MAX_LAG_SECONDS, interval=CHECK_SECONDS
                )
    return _health
