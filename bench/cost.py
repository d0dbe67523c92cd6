"""What a job costs the database, beside the figures (issue 36): WAL bytes, rows and index entries
written, and statements sent, per job, for a stage measured from before it to after it.

The server is shared (CI runs beside the benchmark), so nothing is read server-wide where it can
be read for the benchmark's database alone:

- WAL: the records between the stage's two `pg_current_wal_lsn()`, read back with pg_walinspect
  (a contrib extension created in the benchmark's database; the server's configuration is not
  touched) and kept if a block they change is in the benchmark's database, or if they belong to a
  transaction that changed one (its commit record). Full-page images are counted apart: the first
  change of a page after a checkpoint writes the whole page, so that part depends on when the
  server's checkpoints fall, not on the job. The server-wide difference of the two positions is
  kept in `info` for reference (it includes every other database's writes).
- Index entries: the B-tree records among those that add an entry to a leaf (INSERT_LEAF,
  INSERT_POST and the splits, which carry the entry that caused them). Counted from the WAL rather
  than estimated from the tables' counters ((inserts + updates - HOT updates) times the table's
  indexes) because partial indexes take only the rows their predicate holds, and the estimate
  would count them all.
- Rows: inserts + updates + deletes of `pg_stat_user_tables`, summed over the tables. These
  counters reach the shared statistics when a backend flushes them: at the end of a transaction,
  at most once a second, and an idle backend holding some flushes them within 10 s
  (PGSTAT_IDLE_INTERVAL). The benchmark's own connections are flushed at once
  (`pg_stat_force_next_flush()`); where other processes wrote (workers, the dispatcher, the web
  server) the meter waits out that bound before each reading.
- Statements: every statement sent through Django's connection (BEGIN and COMMIT aside), by the
  code under test in the benchmark's process (the dispatch and cron stages) and by the roles it
  starts (workers, the dispatcher, the web server: bench/probe/sitecustomize.py counts in each
  process and writes its count to a file, read before and after the stage). The baselines' roles
  (bare Celery, Procrastinate) are not counted. pg_stat_statements would count them on the server,
  but it needs `shared_preload_libraries`, which the shared server does not have and the
  benchmark may not change.

What the benchmark writes itself in a stage as bookkeeping (the stand-in fleet marking done what
it took) is set aside: its transactions' WAL records by transaction id, its rows by row count."""

import contextlib
import os
import time
from pathlib import Path

from bench.config import log

# The roles whose statements are a job's (bench/probe/sitecustomize.py writes `<role>.<pid>`).
COUNTED_ROLES = ("bench-tickwork", "bench-dispatcher", "bench-web")
PGSTAT_IDLE_INTERVAL = 10.0  # seconds an idle backend may hold its statistics before flushing them
# The B-tree WAL records that put an entry in a leaf (nbtxlog.h): an insert, an insert into a
# posting list, and a page split (its record carries the new entry).
INDEX_ENTRY_RECORDS = ("INSERT_LEAF", "INSERT_POST", "SPLIT_L", "SPLIT_R")

_COUNTERS = "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd FROM pg_stat_user_tables"

# Each record between the two positions: the relation of its first block if that is in this
# database, its transaction, its size and its full-page images.
_WAL = """
WITH r AS (
    SELECT xid::text::bigint AS xid, resource_manager, record_type, record_length, fpi_length,
        substring(block_ref FROM 'rel \\d+/' || %(db)s::text || '/(\\d+)')::oid AS node
    FROM pg_get_wal_records_info(%(start)s, %(end)s)
), ours AS (
    SELECT DISTINCT xid FROM r WHERE node IS NOT NULL AND xid <> 0 AND xid <> ALL(%(aside)s::bigint[])
)
SELECT coalesce(pg_filenode_relation(0, node)::text, resource_manager) AS relation, resource_manager,
    record_type, count(*), sum(record_length), sum(fpi_length)
FROM r
WHERE xid <> ALL(%(aside)s::bigint[]) AND (node IS NOT NULL OR xid IN (SELECT xid FROM ours))
GROUP BY 1, 2, 3"""


class Cost:
    """The meter of one benchmark run: `with cost.measure(name, jobs=…)` around a stage."""

    def __init__(self, bench) -> None:
        self.bench, self.db = bench, bench.db
        self.rows: list[dict] = []  # one per measured stage, in order
        self.aside_xids: list[int] = []
        self.aside_rows = 0
        self.ready = False

    def prepare(self) -> None:
        self.db.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        self.oid = self.db.scalar("SELECT oid FROM pg_database WHERE datname = current_database()")
        self.ready = True

    def set_aside(self, xid: int, rows: int) -> None:
        """A transaction of the benchmark's own bookkeeping (`xid`, as `txid_current()`), which
        wrote `rows` rows: not the code under test's."""
        self.aside_xids.append(xid % 2**32)
        self.aside_rows += rows

    @contextlib.contextmanager
    def measure(self, name: str, *, jobs: int | None = None, others: bool = False):
        """Around a stage of `jobs` jobs (or set `.jobs` on what it yields). `others`: processes
        other than this one write, so their statistics are waited for."""
        from django.db import connection

        if not self.ready:
            self.prepare()
        stage = Stage(name, jobs)
        self.aside_xids, self.aside_rows = [], 0
        self.settle(others)
        before = self.counters()
        # Where only this process runs the code under test, other roles' upkeep is not the stage's.
        sent = self.roles_statements() if others else 0
        start = self.db.scalar("SELECT pg_current_wal_lsn()")
        with connection.execute_wrapper(stage.count):
            yield stage
        end = self.db.scalar("SELECT pg_current_wal_lsn()")
        # Commits with synchronous_commit off (the claim's) reach the disk up to wal_writer_delay
        # later; pg_walinspect reads only what is flushed.
        while self.db.scalar("SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), %s)", [end]) < 0:
            time.sleep(0.05)
        wal = self.wal(start, end)
        self.settle(others)
        after = self.counters()
        if others:
            stage.statements += self.roles_statements() - sent
        self.rows.append(stage.result(before, after, wal, self.aside_rows))
        self.rows[-1]["index_entries_estimate"] = self.estimate(self.rows[-1])
        self.rows[-1]["wal_bytes_server"] = int(self.db.scalar("SELECT pg_wal_lsn_diff(%s, %s)", [end, start]))
        log(f"  cost of {name}: {self.rows[-1]['per_job']}")

    def settle(self, others: bool) -> None:
        """Until the statistics hold every write made so far."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")
        self.db.conn.execute("SELECT pg_stat_force_next_flush()")
        if others:
            time.sleep(PGSTAT_IDLE_INTERVAL + 1)

    def roles_statements(self) -> int:
        """What the counted roles have sent so far: their processes write their counts twice a
        second (settle waits longer than that before each reading where others write)."""
        directory = os.environ.get("TICKWORK_BENCH_STATEMENTS")
        if not directory:
            return 0
        total = 0
        for path in Path(directory).glob("*.*"):
            role, _, pid = path.name.rpartition(".")
            if role in COUNTED_ROLES and pid.isdigit():
                total += int(path.read_text() or 0)
        return total

    def estimate(self, row: dict) -> float | None:
        """Index entries per job as the counters tell them, for comparison with the WAL's count:
        (inserts + updates - HOT updates) times the table's indexes, partial ones included. None
        where bookkeeping was set aside: the counters cannot tell its updates from the others'."""
        if row["rows_set_aside"] or not row["jobs"]:
            return None
        indexes = dict(
            self.db.conn.execute("SELECT indrelid::regclass::text, count(*) FROM pg_index GROUP BY 1").fetchall()
        )
        written = sum(
            (t["inserted"] + t["updated"] - t["hot_updated"]) * indexes.get(name, 0)
            for name, t in row["rows_by_table"].items()
        )
        return round(written / row["jobs"], 3)

    def counters(self) -> dict[str, tuple[int, int, int, int]]:
        self.db.conn.execute("SELECT pg_stat_clear_snapshot()")
        return {name: tuple(values) for name, *values in self.db.conn.execute(_COUNTERS)}

    def wal(self, start, end) -> list[tuple] | None:
        """The WAL records of this database between the positions, grouped by relation and kind;
        None if the server has recycled them already (a checkpoint in the stage)."""
        import psycopg

        params = {"db": str(self.oid), "start": start, "end": end, "aside": self.aside_xids}
        try:
            return self.db.conn.execute(_WAL, params).fetchall()
        except psycopg.Error as error:
            log(f"  the stage's WAL could not be read back: {error}")
            return None


class Stage:
    def __init__(self, name: str, jobs: int | None) -> None:
        self.name, self.jobs = name, jobs
        self.statements = 0

    def count(self, execute, sql, params, many, context):
        self.statements += len(params) if many else 1
        return execute(sql, params, many, context)

    def result(self, before: dict, after: dict, wal: list[tuple] | None, aside_rows: int) -> dict:
        jobs = self.jobs or 0
        per_table = {}
        for table, values in after.items():
            was = before.get(table, (0, 0, 0, 0))
            ins, upd, dele, hot = (a - b for a, b in zip(values, was, strict=True))
            if ins or upd or dele:
                per_table[table] = {"inserted": ins, "updated": upd, "hot_updated": hot, "deleted": dele}
        rows = sum(t["inserted"] + t["updated"] + t["deleted"] for t in per_table.values()) - aside_rows
        row = {"stage": self.name, "jobs": jobs, "rows_by_table": per_table, "rows_set_aside": aside_rows}
        jobs = jobs or float("nan")  # a stage that made none has no cost per job
        per_job = {"rows": rows / jobs}
        if wal is None:
            per_job.update(wal_bytes=None, fpi_bytes=None, index_entries=None)
        else:
            by_relation: dict[str, int] = {}
            for relation, _, _, _, size, _ in wal:
                by_relation[relation] = by_relation.get(relation, 0) + int(size)
            total, fpi = sum(int(r[4]) for r in wal), sum(int(r[5]) for r in wal)
            entries = sum(r[3] for r in wal if r[1] == "Btree" and r[2] in INDEX_ENTRY_RECORDS)
            row["wal_bytes_by_relation"] = dict(sorted(by_relation.items(), key=lambda kv: -kv[1]))
            row["wal_records"] = sorted(([*r[:4], int(r[4]), int(r[5])] for r in wal), key=lambda r: -r[4])
            per_job.update(wal_bytes=total / jobs, fpi_bytes=fpi / jobs, index_entries=entries / jobs)
        per_job["statements"] = self.statements / jobs
        row["statements"] = self.statements
        row["per_job"] = {k: (None if v is None or v != v else round(v, 3)) for k, v in per_job.items()}
        return row


def print_costs(rows: list[dict]) -> None:
    """The per-job table printed under the figures."""
    table = [("cost per job", "jobs", "WAL bytes", "of it full pages", "rows", "index entries", "statements")]
    for row in rows:
        p = row["per_job"]
        table.append(
            (
                row["stage"],
                f"{row['jobs']:,}",
                *(_fmt(p[k], 0) for k in ("wal_bytes", "fpi_bytes")),
                *(_fmt(p[k], 2) for k in ("rows", "index_entries")),
                _fmt(p["statements"], 3),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for i, cells in enumerate(table):
        print("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(cells)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value: float | None, digits: int, missing: str = "n/a") -> str:
    return missing if value is None else f"{value:,.{digits}f}"
