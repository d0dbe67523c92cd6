"""The event history's partitions on PostgreSQL: executions_executionevent is partitioned by RANGE
of `at`, a partition per UTC day (`<table>_pYYYYMMDD`, [midnight, next midnight)), and a DEFAULT
partition (`<table>_default`) for any row no day's partition takes (executions/migrations/0021).

Why: retention used to delete a finished execution's events row by row with it: the WAL of every
row deleted, then VACUUM's work, and a table and indexes that bloat between. Dropped whole, a day's
partition costs a catalog change (bench/README.md, "Partitioned history").

- Ahead (`create_ahead`, the sweeper's HistoryPartitions service): today's and the next days'
  partitions exist before any event is written into them.
- A write never fails for want of a partition: an event whose day has none (the sweepers down for
  days, a clock far off, an old event moved, below) goes to DEFAULT. When its day's partition is
  made later, the DEFAULT rows it covers move into it first, in the same transaction (PostgreSQL
  refuses to attach a partition over rows DEFAULT holds for it). DEFAULT otherwise stays near
  empty, so attaching a partition, which scans it, stays cheap.
- Dropped (`drop_before`, retention): a day wholly before the retention's cutoff, after the
  executions finished before it are deleted (their events stay behind, executions.models.
  history_cascade, and go with their partition). An event of an execution retention keeps (one
  retrying for longer than the retention, or made long before it finished) must not go with it:
  those rows (few) are copied out first and written again after the drop, into DEFAULT, since no
  partition covers their day any more; there they are deleted row by row (`default_prune`) once
  their execution is gone, as the plain table was.

Every DDL statement here waits at most LOCK_TIMEOUT for its lock: dropping or attaching a partition
needs the parent table exclusively for a moment, and a lock queued behind a long read would hold
up every write of an event behind it. A pass that times out gives up and the next one tries again.
Sweepers running at once take turns by an advisory lock; the one that does not get it skips.
"""

import logging
import re
from datetime import UTC, date, datetime, timedelta

from django.db import OperationalError, connection, transaction

log = logging.getLogger(__name__)

TABLE = "executions_executionevent"
EXECUTIONS = "executions_execution"
LOCK_TIMEOUT = "2s"
# pg_try_advisory_xact_lock's key for the partitions' DDL: "tickwork" "history" in 8 bytes.
ADVISORY_KEY = 0x7469636B_68697374
_DAY = timedelta(days=1)


def partition_name(day: date, *, table: str = TABLE) -> str:
    return f"{table}_p{day:%Y%m%d}"


def day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def partitions(*, table: str = TABLE) -> dict[date, str]:
    """The day partitions of `table` (not DEFAULT), by their day."""
    pattern = re.compile(rf"^{re.escape(table)}_p(\d{{8}})$")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = %s::regclass",
            [table],
        )
        names = [row[0] for row in cursor.fetchall()]
    found = {}
    for name in names:
        matched = pattern.match(name)
        if matched:
            found[datetime.strptime(matched.group(1), "%Y%m%d").replace(tzinfo=UTC).date()] = name
    return found


def _turn(cursor) -> bool:
    """This transaction's turn at the partitions' DDL (another sweeper's, if False)."""
    cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_KEY])
    if not cursor.fetchone()[0]:
        return False
    cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    return True


def create_ahead(*, now: datetime, days: int, table: str = TABLE) -> int:
    """Make the partitions of `now`'s UTC day and the `days` after it that do not exist yet, each
    with the rows DEFAULT holds for its day. Returns how many it made (0 when all were there)."""
    first = now.astimezone(UTC).date()
    wanted = [first + n * _DAY for n in range(days + 1)]
    existing = partitions(table=table)
    missing = [day for day in wanted if day not in existing]
    made = 0
    for day in missing:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                if not _turn(cursor) or day in partitions(table=table):
                    continue
                _create(cursor, table, day)
                made += 1
        except OperationalError as exc:  # lock_timeout: the next pass tries again
            log.warning("history partition %s not made this pass: %s", partition_name(day, table=table), exc)
            break
    return made


def _create(cursor, table: str, day: date) -> None:
    name, low = partition_name(day, table=table), day_start(day)
    bounds = f"'{low.isoformat()}'", f"'{(low + _DAY).isoformat()}'"
    cursor.execute(f'CREATE TABLE "{name}" (LIKE "{table}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS)')
    cursor.execute(
        f'WITH moved AS (DELETE FROM "{table}_default" WHERE at >= {bounds[0]} AND at < {bounds[1]} RETURNING *)'
        f' INSERT INTO "{name}" SELECT * FROM moved'
    )
    # The constraint proves the range, so ATTACH does not scan the new table to check it.
    cursor.execute(f'ALTER TABLE "{name}" ADD CONSTRAINT "{name}_at" CHECK (at >= {bounds[0]} AND at < {bounds[1]})')
    cursor.execute(f'ALTER TABLE "{table}" ATTACH PARTITION "{name}" FOR VALUES FROM ({bounds[0]}) TO ({bounds[1]})')
    cursor.execute(f'ALTER TABLE "{name}" DROP CONSTRAINT "{name}_at"')


def drop_before(*, before: datetime, table: str = TABLE) -> tuple[int, int]:
    """Drop the day partitions wholly before `before`, each in a transaction of its own, the rows
    of executions that still exist written again first (into DEFAULT). Returns how many partitions
    it dropped and how many rows it kept so."""
    dropped = kept = 0
    for day, name in sorted(partitions(table=table).items()):
        if day_start(day) + _DAY > before:
            break
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                if not _turn(cursor):
                    break
                kept += _drop(cursor, table, name)
                dropped += 1
        except OperationalError as exc:  # lock_timeout: the next pass tries again
            log.warning("history partition %s not dropped this pass: %s", name, exc)
            break
    return dropped, kept


def _drop(cursor, table: str, name: str) -> int:
    # Read before the parent's lock is asked for: the partition's day is past, so no new row of
    # it comes while the copy is made (a move writes its event at its own time).
    cursor.execute(
        f'CREATE TEMPORARY TABLE "{name}_kept" ON COMMIT DROP AS SELECT * FROM "{name}" p'
        f' WHERE EXISTS (SELECT 1 FROM "{EXECUTIONS}" e WHERE e.id = p.execution_id)'
    )
    kept = cursor.rowcount
    cursor.execute(f'DROP TABLE "{name}"')
    if kept:
        cursor.execute(f'INSERT INTO "{table}" SELECT * FROM "{name}_kept"')
    return max(kept, 0)


def default_prune(*, before: datetime, limit: int, table: str = TABLE) -> int:
    """Delete up to `limit` rows of DEFAULT from before `before` whose execution is gone. Returns
    how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            f'DELETE FROM "{table}_default" WHERE id IN (SELECT d.id FROM "{table}_default" d WHERE d.at < %s'
            f' AND NOT EXISTS (SELECT 1 FROM "{EXECUTIONS}" e WHERE e.id = d.execution_id) LIMIT %s)',
            [before, limit],
        )
        return cursor.rowcount
