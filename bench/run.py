#!/usr/bin/env python
"""Tickwork benchmark: dispatch throughput, end-to-end throughput, due → start lag, and the cost
of the scheduling statements, each beside a baseline measured in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1/postgres CELERY_BROKER_URL=redis://127.0.0.1:6379/6 \\
        .venv/bin/python bench/run.py                # 1,000,000 future executions
    … bench/run.py --quick                           # a smoke run: small sizes, one round

It creates its own databases (`tickwork_bench` and `tickwork_bench_small`, or --db-name), migrates
and fills them, starts real Celery workers and a real dispatcher, and drops the databases at the
end unless --keep. Baselines and measurements alternate so that the noise of a shared machine
falls on both. bench/README.md says what each figure means.
"""

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUEUE = "tickwork.default"  # the pool `default`, where the dispatcher publishes
BASELINE_QUEUE = "tickwork_bench.baseline"  # the bare Celery tasks' queue
# A second baseline worker with kombu's default Redis transport (ack emulation on), which is how
# bare Celery gets at-least-once delivery; Tickwork turns it off (its rows carry that guarantee).
DEFAULT_TRANSPORT_QUEUE = "tickwork_bench.baseline_default_transport"
NOTIFY_CHANNEL = "tickwork_due"  # dispatcher/wakeup.py: what executions.scheduling sends on create
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres"  # any database on the server
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/6"


STAGES = ("statements", "dispatch", "e2e", "lag")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- Configuration ----------------------------------------------------------------------------------


@dataclass
class Config:
    pending: int
    due: int
    e2e: int
    lag_rate: float
    lag_seconds: float
    rounds: int
    concurrency: int
    prefetch: int
    batch: int
    statement_runs: int
    db_name: str
    keep: bool
    json_path: str
    quick: bool
    stages: list[str]


def parse_args(argv: list[str]) -> Config:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, help="future executions in the table (default 1,000,000)")
    parser.add_argument("--due", type=int, help="due executions per dispatch round (default 30,000)")
    parser.add_argument("--e2e", type=int, help="noop jobs per end-to-end round (default 5,000)")
    parser.add_argument("--lag-rate", type=float, default=500.0, help="jobs/s offered in the lag test (500)")
    parser.add_argument("--lag-seconds", type=float, help="seconds of offered load per side (default 30)")
    parser.add_argument("--rounds", type=int, help="rounds per figure, alternating with the baseline (default 3)")
    parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 2, help="worker processes (CPUs)")
    parser.add_argument("--prefetch", type=int, default=1, help="worker prefetch multiplier (1, as configured)")
    parser.add_argument("--batch", type=int, help="dispatch batch (default: TICKWORK_DISPATCH_BATCH)")
    parser.add_argument("--statement-runs", type=int, help="runs per statement and database (400; claim: a tenth)")
    parser.add_argument("--db-name", default="tickwork_bench", help="database to create; must start tickwork_bench")
    parser.add_argument("--keep", action="store_true", help="keep the databases at the end")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results.json"), help="where to write the results")
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, one round")
    parser.add_argument(
        "--only", default=",".join(STAGES), help=f"comma-separated stages to run, of {','.join(STAGES)} (all)"
    )
    args = parser.parse_args(argv)
    only = [stage.strip() for stage in args.only.split(",") if stage.strip()]
    if unknown := set(only) - set(STAGES):
        parser.error(f"unknown stage(s): {', '.join(sorted(unknown))}")
    if not args.db_name.startswith("tickwork_bench"):
        parser.error("--db-name must start with tickwork_bench: the benchmark drops it")
    quick = args.quick
    return Config(
        pending=args.pending or (100_000 if quick else 1_000_000),
        due=args.due or (3_000 if quick else 30_000),
        e2e=args.e2e or (500 if quick else 5_000),
        lag_rate=args.lag_rate,
        lag_seconds=args.lag_seconds or (4.0 if quick else 30.0),
        rounds=args.rounds or (1 if quick else 3),
        concurrency=args.concurrency,
        prefetch=args.prefetch,
        batch=args.batch or 0,
        statement_runs=args.statement_runs or (100 if quick else 400),
        db_name=args.db_name,
        keep=args.keep,
        json_path=args.json,
        quick=quick,
        stages=only,
    )


def database_urls(base: str, name: str) -> tuple[str, str]:
    """(maintenance URL, URL of database `name`) on the server that `base` points to."""
    parts = urlsplit(base)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        sys.exit("DATABASE_URL must point to PostgreSQL (postgres://user@host:port/db)")
    maintenance = parts.path.lstrip("/") or "postgres"
    if maintenance.startswith("tickwork_bench"):
        maintenance = "postgres"
    admin = urlunsplit(("postgresql", parts.netloc, f"/{maintenance}", parts.query, ""))
    return admin, urlunsplit(("postgresql", parts.netloc, f"/{name}", parts.query, ""))


# --- Results ----------------------------------------------------------------------------------------


@dataclass
class Figure:
    name: str
    unit: str
    value: float
    baseline: float
    baseline_name: str
    target: str
    passed: bool
    samples: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("nan")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = int(-(-len(ordered) * q // 100))  # ceil(n·q/100)
    return ordered[max(1, min(len(ordered), rank)) - 1]


def print_table(figures: list[Figure]) -> None:
    rows = [("figure", "value", "baseline", "ratio", "target", "")]
    for f in figures:
        rows.append(
            (
                f.name,
                _fmt(f.value, f.unit),
                f"{_fmt(f.baseline, f.unit)} {f.baseline_name}",
                f"{f.ratio:.2f}x",
                f.target,
                "" if f.target == "reference" else "PASS" if f.passed else "FAIL",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value: float, unit: str) -> str:
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "ms":
        return f"{value:.3f} ms" if value < 10 else f"{value:,.1f} ms"
    return f"{value:g}{unit}"


# --- The databases ----------------------------------------------------------------------------------

# Jobs, their first executions and those executions' first events, in one statement: a one-off
# `noop` job per execution, due at a random instant in [start, start + span). One priority in ten
# is HIGH and one in ten LOW, so the claim walks all three levels. (`+ g * interval '0'` makes
# the LATERAL depend on g, so random() is drawn per row.)
_JOBS_AND_EXECUTIONS = """
WITH j AS (
    INSERT INTO jobs_job (id, tenant_id, name, type, run_at, schedule, timezone, pool, handler, payload,
        max_attempts, backoff, initial_delay_ms, max_delay_ms, jitter, timeout_sec, priority, misfire_policy,
        concurrency_policy, state, next_fire_at, request_fingerprint, created_at, updated_at)
    SELECT gen_random_uuid(), %(tenant)s, 'bench ' || g, 'ONCE', t.at, '', 'UTC', 'default', 'noop', '{}',
        3, 'EXPONENTIAL', 1000, 60000, true, 3600,
        CASE WHEN g %% 10 = 0 THEN 0 WHEN g %% 10 = 5 THEN 2 ELSE 1 END,
        'RUN_ONCE', 'ALLOW', 'ACTIVE', t.at, '', %(now)s, %(now)s
    FROM generate_series(1, %(count)s) AS g
    CROSS JOIN LATERAL (
        SELECT %(start)s::timestamptz + random() * %(span)s * interval '1 second' + g * interval '0' AS at
    ) AS t
    RETURNING id, tenant_id, priority, run_at
), e AS (
    INSERT INTO executions_execution (id, job_id, tenant_id, pool, priority, origin, attempt, state, scheduled_for,
        available_at, lease_token, publish_count, worker_id, error, traceback, created_at, updated_at)
    SELECT gen_random_uuid(), j.id, j.tenant_id, 'default', j.priority, 'SCHEDULE', 1, 'PENDING', j.run_at,
        j.run_at, 0, 0, '', '', '', %(now)s, %(now)s
    FROM j
    RETURNING id
)"""
_FIRST_EVENTS = """
INSERT INTO executions_executionevent (execution_id, at, from_state, to_state, attempt, worker_id, message)
SELECT e.id, %(now)s, '', 'PENDING', 1, '', 'scheduled' FROM e"""
# Jobs, their first executions and those executions' first events, in one statement: a one-off
# `noop` job per execution, due at a random instant in [start, start + span). One priority in ten
# is HIGH and one in ten LOW, so the claim walks all three levels. (`+ g * interval '0'` makes
# the LATERAL depend on g, so random() is drawn per row.)
INSERT_SQL = _JOBS_AND_EXECUTIONS + _FIRST_EVENTS
# The same with the dispatchers' wake-up that executions.scheduling sends with each create, still one
# statement (so one round trip): the lag test's feeder makes 500 jobs a second on the same CPUs.
INSERT_AND_NOTIFY_SQL = (
    f"{_JOBS_AND_EXECUTIONS}, ev AS ({_FIRST_EVENTS} RETURNING 1)"
    " SELECT pg_notify(%(channel)s, %(start)s::text) FROM ev"
)


class Database:
    """One of the benchmark's databases: created, filled and dropped here through plain psycopg
    (bulk SQL), beside Django's connection (the code under test)."""

    def __init__(self, admin_url: str, url: str, name: str) -> None:
        self.admin_url, self.url, self.name = admin_url, url, name
        self.conn = None

    def create(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{self.name}"')

    def connect(self) -> None:
        import psycopg

        self.conn = psycopg.connect(self.url, autocommit=True)

    def drop(self) -> None:
        import psycopg

        if self.conn is not None:
            self.conn.close()
            self.conn = None
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def scalar(self, sql: str, params=None):
        return self.conn.execute(sql, params).fetchone()[0]

    def tenant(self, slug: str) -> int:
        return self.scalar(
            "INSERT INTO tenants_tenant (slug, name, weight, signing_secret, created_at)"
            " VALUES (%s, %s, 1, md5(random()::text), now()) RETURNING id",
            [slug, slug],
        )

    def insert(
        self, *, tenant: int, count: int, start: datetime, span: float, chunk: int = 50_000, notify: bool = False
    ) -> None:
        """`count` one-off noop jobs due in [start, start + span), committed together; `notify`
        wakes the dispatchers as executions.scheduling does."""
        now = datetime.now(UTC)
        if count == 1 and notify:  # autocommit: one statement, one round trip
            params = {"tenant": tenant, "count": 1, "start": start, "span": span, "now": now}
            self.conn.execute(INSERT_AND_NOTIFY_SQL, {**params, "channel": NOTIFY_CHANNEL})
            return
        with self.conn.transaction():
            for offset in range(0, count, chunk):
                params = {"tenant": tenant, "count": min(chunk, count - offset), "start": start, "span": span}
                self.conn.execute(INSERT_SQL, {**params, "now": now})
            if notify:
                self.conn.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, start.isoformat()])

    def vacuum(self) -> None:
        for table in ("jobs_job", "executions_execution", "executions_executionevent"):
            self.conn.execute(f"VACUUM (ANALYZE) {table}")

    def pending(self) -> int:
        return self.scalar("SELECT count(*) FROM executions_execution WHERE state = 'PENDING'")

    def all_succeeded(self, tenant: int, count: int) -> bool:
        """Whether the tenant's `count` jobs have all succeeded. Polled every 50 ms while the
        system under test runs, so it reads only the unfinished rows (a few index probes):
        counting the SUCCEEDED ones cost 22 ms a poll at 5,000 rows, CPU taken from the workers."""
        unfinished = self.scalar(
            "SELECT count(*) FROM executions_execution"
            " WHERE tenant_id = %s AND state IN ('PENDING', 'QUEUED', 'RUNNING')",
            [tenant],
        )
        return (
            unfinished == 0
            and self.scalar(
                "SELECT count(*) FROM executions_execution WHERE tenant_id = %s AND state = 'SUCCEEDED'", [tenant]
            )
            >= count
        )


# --- Processes --------------------------------------------------------------------------------------


class Processes:
    """Workers and the dispatcher, each in a session of its own, stopped by pid at the end."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        with open(self.log_dir / f"{name}.log", "w") as out:
            proc = subprocess.Popen(
                args, cwd=ROOT, env={**self.env, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.procs.append((name, proc))
        return proc

    def worker(self, name: str, queue: str, cfg: Config, env: dict[str, str] | None = None) -> subprocess.Popen:
        """A Celery worker of the project's app. Tickwork's and the baseline's differ only in queue
        (and `env`, for the baseline on kombu's default transport)."""
        return self.start(
            name,
            [
                sys.executable, "-m", "celery", "-A", "scheduler_project", "worker",
                "-Q", queue, "-n", f"{name}@%h", "-P", "prefork", "-c", str(cfg.concurrency),
                "--prefetch-multiplier", str(cfg.prefetch),
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--include", "bench.baseline_tasks", "-l", "WARNING",
            ],
            env,
        )  # fmt: skip

    def stop_all(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: only what we started
                proc.wait()
        self.procs.clear()

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.log_dir / (name + '.log')}")


class CpuMeter:
    """CPU time spent by each role while a measurement runs, from /proc: where a job's cost goes.
    A process belongs to the role whose session it is in (each role starts a session of its
    own); PostgreSQL's and Redis's server processes are counted apart."""

    TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def __init__(self, procs: "Processes") -> None:
        self.procs = procs

    def snapshot(self) -> dict[str, float]:
        roles = {proc.pid: name for name, proc in self.procs.procs}
        totals: dict[str, float] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            pid, session = int(entry.name), int(fields[3])
            seconds = (int(fields[11]) + int(fields[12])) / self.TICK
            if pid == os.getpid():
                role = "feeder (this script)"
            elif session in roles:
                # A worker's main process (the consumer) apart from its pool processes.
                role = roles[session] + ("" if pid == session else " (children)")
            elif comm.startswith("postgres"):
                role = "postgresql"
            elif comm.startswith("redis"):
                role = "redis"
            else:
                role = "other"
            totals[role] = totals.get(role, 0.0) + seconds
        return totals

    @staticmethod
    def per_job(before: dict[str, float], after: dict[str, float], jobs: int) -> dict[str, float]:
        """CPU milliseconds per job, by role, largest first."""
        spent = {role: (after.get(role, 0.0) - before.get(role, 0.0)) * 1000 / jobs for role in after}
        return dict(sorted(((r, round(ms, 3)) for r, ms in spent.items() if ms > 0), key=lambda x: -x[1]))


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str, interval: float, procs=None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        if procs is not None:
            procs.check_alive()
        time.sleep(interval)


def capture(call: Callable[[], object]) -> list[tuple[str, list]]:
    """The statements (not savepoints) that `call` sends, with their parameters. Whatever `call`
    changed is rolled back."""
    from django.db import connection, transaction

    seen: list[tuple[str, list]] = []

    def record(execute, sql, params, many, context):
        if not sql.lstrip().upper().startswith(("SAVEPOINT", "RELEASE", "ROLLBACK")):
            seen.append((sql, list(params or [])))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record), transaction.atomic():
        call()
        transaction.set_rollback(True)
    return seen


# --- The benchmark ----------------------------------------------------------------------------------


class Bench:
    def __init__(self, cfg: Config, db: Database, small: Database, broker_url: str, env: dict, log_dir: Path):
        import redis

        self.cfg, self.db, self.small, self.env = cfg, db, small, env
        self.redis = redis.Redis.from_url(broker_url)
        self.procs = Processes(env, log_dir)
        self.figures: list[Figure] = []
        self.info: dict = {}

    @property
    def batch(self) -> int:
        from django.conf import settings

        return self.cfg.batch or settings.TICKWORK_DISPATCH_BATCH

    # -- the broker

    def queue_keys(self, queue: str) -> list[str]:
        """The Redis lists of a queue, one per priority step, as kombu names them."""
        from scheduler_project.celery import app

        with app.connection_for_write() as conn:
            channel = conn.default_channel
            return [channel._q_for_pri(queue, p) for p in channel.priority_steps]

    def queue_length(self, queue: str) -> int:
        return sum(self.redis.llen(k) for k in self.queue_keys(queue))

    def purge(self, queue: str) -> None:
        self.redis.delete(*self.queue_keys(queue))

    # -- the run

    def run(self) -> None:
        cfg = self.cfg
        self.fill()
        if "statements" in cfg.stages:
            self.statements()
        if not cfg.keep:
            self.small.drop()
        if "dispatch" in cfg.stages:
            self.dispatch()
        if {"e2e", "lag"} & set(cfg.stages):
            # The dispatch rounds left ~100k dead row versions: vacuum now, or autovacuum would
            # do it during the Tickwork rounds only (the baseline does not touch PostgreSQL).
            self.db.vacuum()
            for queue in (QUEUE, BASELINE_QUEUE, DEFAULT_TRANSPORT_QUEUE):
                self.purge(queue)
            self.procs.worker("bench-tickwork", QUEUE, cfg)
            self.procs.worker("bench-baseline", BASELINE_QUEUE, cfg)
            if "e2e" in cfg.stages:
                acks = {"TICKWORK_REDIS_ACK_EMULATION": "true"}
                self.procs.worker("bench-baseline-default-transport", DEFAULT_TRANSPORT_QUEUE, cfg, acks)
            self.procs.start("bench-dispatcher", [sys.executable, "manage.py", "run_dispatcher"])
            self.wait_for_workers(
                ["bench-tickwork", "bench-baseline"]
                + (["bench-baseline-default-transport"] if "e2e" in cfg.stages else [])
            )
            self.end_to_end() if "e2e" in cfg.stages else self.warm_up()
            if "lag" in cfg.stages:
                self.lag()

    def fill(self) -> None:
        """The full database: `pending` future executions and one round's due set. The small one:
        a tenth of the future and the same due set."""
        cfg, now = self.cfg, datetime.now(UTC)
        small = max(cfg.pending // 10, 1)
        for db, count in ((self.small, small), (self.db, cfg.pending)):
            log(f"{db.name}: filling {count:,} future and {cfg.due:,} due executions")
            began = time.perf_counter()
            db.insert(tenant=db.tenant("bench-fill"), count=count, start=now + timedelta(hours=1), span=30 * 86400)
            db.insert(tenant=db.tenant("bench-due-0"), count=cfg.due, start=now - timedelta(seconds=120), span=60)
            db.vacuum()
            log(f"  {time.perf_counter() - began:.1f}s; {db.pending():,} pending")
        self.info["pending_small"] = small

    # 1. The scheduling statements, at the full backlog and at a tenth of it.

    def statements(self) -> None:
        """Each statement of the dispatcher's loop exactly as dispatcher/claim.py sends it (captured
        from the code, parameters and all), timed on both databases in turn, each run in a
        transaction that is rolled back; medians."""
        import psycopg
        from django.conf import settings

        from dispatcher.claim import claim_due, next_due_at

        grace = timedelta(seconds=settings.TICKWORK_PUBLISH_GRACE_SECONDS)
        earliest = min(
            db.scalar("SELECT min(available_at) FROM executions_execution WHERE state = 'PENDING'")
            for db in (self.db, self.small)
        )
        # The claim last: each rolled-back run leaves a batch of dead row versions behind it.
        # A claim is two statements: the SELECT that takes and locks the batch, and the UPDATE of
        # those rows (their ids, one array parameter, come from the SELECT on each database).
        statements = {
            "empty poll": capture(
                lambda: claim_due(now=earliest - timedelta(seconds=1), limit=self.batch, publish_grace=grace)
            ),
            "next-due peek": capture(lambda: next_due_at(after=datetime.now(UTC))),
            "claim": capture(lambda: claim_due(now=datetime.now(UTC), limit=self.batch, publish_grace=grace)),
        }
        self.info["statements"] = {name: [sql for sql, _ in steps] for name, steps in statements.items()}
        # As executions.states.fetch runs them: prepared, with server-side parameters, when the
        # settings allow it (DATABASE_PREPARED_STATEMENTS); else bound on the client, as Django does.
        prepared = settings.DATABASES["default"].get("OPTIONS", {}).get("prepare_threshold") is not None
        self.info["statements_prepared"] = prepared
        conns = {
            which: psycopg.connect(
                db.url, autocommit=True, cursor_factory=psycopg.Cursor if prepared else psycopg.ClientCursor
            )
            for which, db in (("full", self.db), ("small", self.small))
        }
        small = self.info["pending_small"]
        try:
            for name, steps in statements.items():
                runs = self.cfg.statement_runs if name != "claim" else max(10, self.cfg.statement_runs // 10)
                samples: dict[str, list[float]] = {"full": [], "small": []}
                rows = {}
                for i in range(runs):
                    for which in ("full", "small") if i % 2 else ("small", "full"):
                        conn = conns[which]
                        with conn.transaction(force_rollback=True), conn.cursor() as cursor:
                            started = time.perf_counter()
                            ids: list = []
                            for sql, params in steps:
                                params = [ids if isinstance(p, list) else p for p in params]
                                cursor.execute(sql, params, prepare=prepared)
                                result = cursor.fetchall()
                                ids = [row[0] for row in result]
                            rows[which] = len(result)
                            samples[which].append((time.perf_counter() - started) * 1000)
                value, base = median(samples["full"]), median(samples["small"])
                log(f"  {name}: {value:.3f} ms at {self.cfg.pending:,}, {base:.3f} ms at {small:,}; rows {rows}")
                ok = value <= 1.3 * base
                target = "≤ 1.3x baseline"
                if name == "empty poll":
                    ok = ok and value <= 1.0
                    target += ", ≤ 1 ms"
                label = f"{name} ({self.batch})" if name == "claim" else name
                self.figures.append(
                    Figure(f"{label} @ {self.cfg.pending:,}", "ms", value, base, f"@ {small:,}", target, ok, samples)
                )
        finally:
            for conn in conns.values():
                conn.close()

    # 2. Dispatch throughput: due executions claimed and on the broker, against apply_async.

    def dispatch(self) -> None:
        cfg = self.cfg
        log(f"dispatch: {cfg.rounds} round(s) of {cfg.due:,} due among {cfg.pending:,} future, batch {self.batch}")
        ours, theirs = [], []
        for r in range(cfg.rounds):
            if r:
                start = datetime.now(UTC) - timedelta(seconds=120)
                self.db.insert(tenant=self.db.tenant(f"bench-due-{r}"), count=cfg.due, start=start, span=60)
                self.db.vacuum()
            ours.append(self.dispatch_round())
            theirs.append(self.apply_async_round())
            log(f"  round {r + 1}: dispatch {ours[-1]:,.0f}/s, apply_async loop {theirs[-1]:,.0f}/s")
        self.add("dispatch throughput", "/s", ours, theirs, "apply_async loop", 5.0)

    def dispatch_round(self) -> float:
        """dispatch_once with the real CeleryPublisher until the due set is claimed; everything
        claimed is on the broker when it returns (publishing happens on commit)."""
        from django.utils import timezone

        from background.publisher import CeleryPublisher
        from dispatcher.dispatcher import dispatch_once

        publisher = CeleryPublisher()
        self.purge(QUEUE)
        claimed = 0
        started = time.perf_counter()
        while claimed < self.cfg.due:
            result = dispatch_once(now=timezone.now(), publisher=publisher, limit=self.batch)
            if not result.claimed:
                break
            claimed += result.claimed
        elapsed = time.perf_counter() - started
        on_broker = self.queue_length(QUEUE)
        self.purge(QUEUE)
        if claimed != self.cfg.due or on_broker != self.cfg.due:
            raise RuntimeError(f"dispatch round: claimed {claimed}, on the broker {on_broker}, due {self.cfg.due}")
        return self.cfg.due / elapsed

    def apply_async_round(self) -> float:
        """The same messages, one `apply_async` each: what publishing costs without batching."""
        from worker.tasks import run_execution

        self.purge(QUEUE)
        ids = [str(uuid.uuid4()) for _ in range(self.cfg.due)]
        started = time.perf_counter()
        for execution_id in ids:
            run_execution.apply_async(args=(execution_id, 1), queue=QUEUE)
        elapsed = time.perf_counter() - started
        on_broker = self.queue_length(QUEUE)
        self.purge(QUEUE)
        if on_broker != self.cfg.due:
            raise RuntimeError(f"apply_async round: {on_broker} on the broker, sent {self.cfg.due}")
        return self.cfg.due / elapsed

    # 3. End to end: noop jobs run by real workers with outcomes in PostgreSQL, against bare Celery.

    def warm_up(self) -> None:
        """A first round on each side, not counted: workers' first tasks import and connect."""
        log("warming up the workers")
        self.tickwork_e2e_round("warm-up", min(200, self.cfg.e2e))
        self.celery_e2e_round(min(200, self.cfg.e2e), BASELINE_QUEUE)
        if "e2e" in self.cfg.stages:
            self.celery_e2e_round(min(200, self.cfg.e2e), DEFAULT_TRANSPORT_QUEUE)

    def end_to_end(self) -> None:
        cfg = self.cfg
        self.warm_up()
        log(f"end to end: {cfg.rounds} round(s) of {cfg.e2e:,} noop jobs, prefork x {cfg.concurrency}")
        ours, default_transport, same_transport = [], [], []
        for r in range(cfg.rounds):
            ours.append(self.tickwork_e2e_round(str(r), cfg.e2e))
            default_transport.append(self.celery_e2e_round(cfg.e2e, DEFAULT_TRANSPORT_QUEUE))
            same_transport.append(self.celery_e2e_round(cfg.e2e, BASELINE_QUEUE))
            log(
                f"  round {r + 1}: tickwork {ours[-1]:,.0f}/s, bare Celery {default_transport[-1]:,.0f}/s"
                f" (kombu's default transport), {same_transport[-1]:,.0f}/s (no ack emulation, as Tickwork)"
            )
        self.add("end-to-end noop", "/s", ours, default_transport, "bare Celery noop, default transport", 0.6)
        # For reference, no target: bare Celery without ack emulation loses a crashed worker's
        # messages (at-most-once), which Tickwork can afford only because its rows are the truth.
        self.add("end-to-end noop", "/s", ours, same_transport, "bare Celery noop, no ack emulation", None)

    def tickwork_e2e_round(self, label: str, count: int) -> float:
        """`count` due noop jobs committed at once (and the dispatcher woken, as the API would):
        SUCCEEDED per second, from the commit to the last finished_at."""
        tenant = self.db.tenant(f"bench-e2e-{label}")
        due = datetime.now(UTC) - timedelta(seconds=1)
        self.db.insert(tenant=tenant, count=count, start=due, span=0.5, notify=True)
        committed = time.time()
        wait_for(
            lambda: self.db.all_succeeded(tenant, count),
            timeout=max(120, count / 20),
            what="the end-to-end round",
            interval=0.05,
            procs=self.procs,
        )
        last = self.db.scalar(
            "SELECT extract(epoch FROM max(finished_at)) FROM executions_execution WHERE tenant_id = %s", [tenant]
        )
        return count / (float(last) - committed)

    def celery_e2e_round(self, count: int, queue: str) -> float:
        """`count` no-op tasks and a last one that records when it ran, enqueued together as
        Tickwork's publisher enqueues (one pipeline): tasks per second from enqueue to the last."""
        from celery.utils.nodenames import anon_nodename

        from background.publisher import RedisEnvelope
        from scheduler_project.celery import app

        key = f"tickwork_bench:mark:{uuid.uuid4().hex}"
        noop = RedisEnvelope("tickwork_bench.noop", origin=anon_nodename(), reply_to=app.thread_oid)
        mark = RedisEnvelope("tickwork_bench.mark", origin=anon_nodename(), reply_to=app.thread_oid)
        started = time.time()
        messages = [noop.render((), queue) for _ in range(count)] + [mark.render((key,), queue)]
        pipe = self.redis.pipeline(transaction=False)
        for start in range(0, len(messages), 1000):
            pipe.lpush(queue, *messages[start : start + 1000])
        pipe.execute()
        wait_for(
            lambda: self.redis.llen(key) > 0,
            timeout=max(120, count / 20),
            what="the bare Celery round",
            interval=0.02,
            procs=self.procs,
        )
        last = float(self.redis.lpop(key))
        self.redis.delete(key)
        return count / (last - started)

    # 4. Due → start lag at a steady offered load.

    def lag(self) -> None:
        cfg = self.cfg
        seconds = cfg.lag_seconds / cfg.rounds
        log(f"lag: {cfg.lag_rate:.0f} jobs/s, {cfg.rounds} segment(s) of {seconds:.0f}s each side")
        ours, theirs = [], []
        for r in range(cfg.rounds):
            ours += self.tickwork_lag(r, seconds)
            theirs += self.celery_lag(seconds)
            log(f"  segment {r + 1}: tickwork p50 {percentile(ours, 50):.1f} ms p99 {percentile(ours, 99):.1f} ms;"
                f" bare Celery p50 {percentile(theirs, 50):.1f} ms p99 {percentile(theirs, 99):.1f} ms")  # fmt: skip
        for q, limit in ((50, 20.0), (99, 100.0)):
            value, baseline = percentile(ours, q), percentile(theirs, q)
            self.figures.append(
                Figure(
                    f"due → start lag p{q}",
                    "ms",
                    value,
                    baseline,
                    "bare Celery publish → start",
                    f"≤ {limit:.0f} ms",
                    value <= limit,
                    {"count": len(ours), "baseline_count": len(theirs)},
                )
            )

    def tickwork_lag(self, segment: int, seconds: float) -> list[float]:
        """A feeder makes one-off jobs due the moment they are made, each committed with its
        wake-up as executions.scheduling does; lag = started_at - scheduled_for, from the rows."""
        tenant = self.db.tenant(f"bench-lag-{segment}")
        meter = CpuMeter(self.procs)
        before = meter.snapshot()
        sent = self.feed(seconds, lambda at: self.db.insert(tenant=tenant, count=1, start=at, span=0, notify=True))
        wait_for(
            lambda: self.db.all_succeeded(tenant, sent),
            timeout=120,
            what="the lag test's jobs",
            interval=0.05,
            procs=self.procs,
        )
        cpu = meter.per_job(before, meter.snapshot(), sent)
        log(f"  CPU ms per job: {cpu}")
        self.info.setdefault("lag_cpu_ms_per_job", []).append(cpu)
        rows = self.db.conn.execute(
            "SELECT extract(epoch FROM started_at - scheduled_for) FROM executions_execution WHERE tenant_id = %s",
            [tenant],
        ).fetchall()
        return [float(row[0]) * 1000 for row in rows]

    def celery_lag(self, seconds: float) -> list[float]:
        """The same feeder calling apply_async on a task that records how late it started."""
        from bench.baseline_tasks import lag

        key = f"tickwork_bench:lag:{uuid.uuid4().hex}"
        meter = CpuMeter(self.procs)
        before = meter.snapshot()
        sent = self.feed(seconds, lambda at: lag.apply_async(args=(key, at.timestamp()), queue=BASELINE_QUEUE))
        wait_for(
            lambda: self.redis.llen(key) >= sent, timeout=120, what="the baseline lag tasks", interval=0.05,
            procs=self.procs,
        )  # fmt: skip
        cpu = meter.per_job(before, meter.snapshot(), sent)
        log(f"  CPU ms per bare Celery task: {cpu}")
        self.info.setdefault("lag_baseline_cpu_ms_per_task", []).append(cpu)
        values = [float(v) * 1000 for v in self.redis.lrange(key, 0, -1)]
        self.redis.delete(key)
        return values

    def feed(self, seconds: float, submit: Callable[[datetime], None]) -> int:
        """Call `submit(now)` `lag_rate` times a second, on a fixed schedule, for `seconds`."""
        total = int(self.cfg.lag_rate * seconds)
        interval = 1.0 / self.cfg.lag_rate
        started = time.perf_counter()
        for i in range(total):
            delay = started + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            submit(datetime.now(UTC))
        achieved = total / (time.perf_counter() - started)
        if achieved < 0.95 * self.cfg.lag_rate:
            log(f"  the feeder managed only {achieved:.0f}/s of {self.cfg.lag_rate:.0f}/s")
        self.info.setdefault("lag_offered_per_second", []).append(round(achieved))
        return total

    # -- helpers

    def wait_for_workers(self, names: list[str]) -> None:
        from scheduler_project.celery import app

        def ready() -> bool:
            replies = app.control.ping(timeout=0.5)
            return set(names) <= {node.split("@")[0] for reply in replies for node in reply}

        wait_for(ready, timeout=60, what="the workers to start", interval=0.2, procs=self.procs)

    def add(self, name: str, unit: str, ours: list, theirs: list, baseline_name: str, at_least: float | None) -> None:
        value, baseline = median(ours), median(theirs)
        passed = at_least is None or value >= at_least * baseline
        target = "reference" if at_least is None else f"≥ {at_least:g}x baseline"
        self.figures.append(
            Figure(name, unit, value, baseline, baseline_name, target, passed, {"ours": ours, "baseline": theirs})
        )


def main(argv: list[str]) -> int:
    cfg = parse_args(argv)
    base_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    broker_url = os.environ.get("CELERY_BROKER_URL") or DEFAULT_BROKER_URL
    if not broker_url.startswith("redis"):
        sys.exit("CELERY_BROKER_URL must be a Redis URL (redis://host:port/db): the benchmark reads the queues")
    admin_url, url = database_urls(base_url, cfg.db_name)
    _, small_url = database_urls(base_url, f"{cfg.db_name}_small")
    db = Database(admin_url, url, cfg.db_name)
    small = Database(admin_url, small_url, f"{cfg.db_name}_small")
    # Production mode: with REDIS_URL the live views' channel layer is Redis, and every transition
    # sends its notice there (dashboard/live.py). Without it they would be skipped.
    env = dict(os.environ, DATABASE_URL=url, CELERY_BROKER_URL=broker_url)
    env.setdefault("REDIS_URL", broker_url)
    env.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    env.setdefault("TICKWORK_LOG_LEVEL", "WARNING")
    if cfg.batch:
        env["TICKWORK_DISPATCH_BATCH"] = str(cfg.batch)
    os.environ.update(env)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    log_dir = Path(tempfile.mkdtemp(prefix="tickwork-bench-"))
    bench = Bench(cfg, db, small, broker_url, env, log_dir)
    try:
        log(f"creating {db.name} and {small.name}")
        for each in (db, small):
            each.create()
        call_command("migrate", verbosity=0)
        migrate = [sys.executable, "manage.py", "migrate", "-v", "0"]
        subprocess.run(migrate, cwd=ROOT, env=dict(env, DATABASE_URL=small_url), check=True)
        for each in (db, small):
            each.connect()
        bench.run()
    except BaseException:
        log(f"failed; process logs in {log_dir}")
        raise
    finally:
        bench.procs.stop_all()
        with contextlib.suppress(Exception):
            for queue in (QUEUE, BASELINE_QUEUE, DEFAULT_TRANSPORT_QUEUE):
                bench.purge(queue)
        connections.close_all()
        for each in (db, small):
            if cfg.keep:
                log(f"kept database {each.name}")
            else:
                each.drop()
        if not cfg.keep:
            log("dropped the databases")

    print()
    print(
        f"Tickwork benchmark: {cfg.pending:,} future executions; {cfg.due:,} due per dispatch round; "
        f"{cfg.e2e:,} noop jobs per end-to-end round; lag at {cfg.lag_rate:.0f}/s for {cfg.lag_seconds:.0f}s; "
        f"{cfg.rounds} round(s), medians; workers prefork x {cfg.concurrency}, prefetch {cfg.prefetch}; "
        f"dispatch batch {bench.batch}; live views via {'Redis' if env['REDIS_URL'] else 'nothing'}"
    )
    print()
    print_table(bench.figures)
    results = {
        "config": asdict(cfg),
        "batch": bench.batch,
        "live_views_redis": bool(env["REDIS_URL"]),
        "finished": datetime.now(UTC).isoformat(),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "info": bench.info,
        "figures": [dict(asdict(f), ratio=f.ratio) for f in bench.figures],
        "passed": all(f.passed for f in bench.figures),
    }
    Path(cfg.json_path).write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"\nresults written to {cfg.json_path}")
    return 0 if results["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
