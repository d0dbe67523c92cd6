"""The benchmark's configuration: its command line, queues, default URLs and log."""

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent

POOL = "default"  # the pool of every job the benchmark makes (the `noop` handler's)
QUEUE = f"tickwork.{POOL}"  # where the dispatcher publishes that pool's work: the workers' queue
BASELINE_QUEUE = "tickwork_bench.baseline"  # the bare Celery tasks' queue
# A second baseline worker with kombu's default Redis transport (ack emulation on), which is how
# bare Celery gets at-least-once delivery; Tickwork turns it off (its rows carry that guarantee).
DEFAULT_TRANSPORT_QUEUE = "tickwork_bench.baseline_default_transport"
NOTIFY_CHANNEL = "tickwork_due"  # dispatcher/wakeup.py: what scheduling.job_creation sends on create
# The fleet that stands in for workers where none runs (the dispatch and cron stages): a worker row
# with this many slots (Database.capacity), so a claim may admit about twice this at once.
FLEET_SLOTS = 2_000
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres"  # any database on the server
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/6"


STAGES = (
    "statements", "dispatch", "cron", "dispatchers", "http", "e2e", "lag", "workflows", "fairness", "ratelimit",
    "retention",
)  # fmt: skip


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
    herd: int
    dispatchers_backlog: int
    herd_tenants: int
    fair_backlog: int
    noisy_backlog: int
    cron_schedules: int
    cron_herd: int
    retention_volume: int
    history_rows: int
    workflow_chains: int
    workflow_steps: int
    workflow_interval: float


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
    parser.add_argument("--herd", type=int, help="executions due at once in the herd (default 100,000)")
    parser.add_argument(
        "--dispatchers-backlog", type=int, help="due one-offs over 8 pools in the dispatchers stage (default 40,000)"
    )
    parser.add_argument("--herd-tenants", type=int, help="tenants they belong to (default 500)")
    parser.add_argument("--schedules", type=int, help="cron schedules for a minute's fires (default 10,000)")
    parser.add_argument("--cron-herd", type=int, help="jobs 0 0 * * * in the large cron herd (default 100,000)")
    parser.add_argument("--retention-volume", type=int, help="finished jobs a simulated day (default 200,000)")
    parser.add_argument(
        "--history-rows", type=int, help="history rows written over the retention stage's week (default 10,000,000)"
    )
    parser.add_argument("--workflow-chains", type=int, help="10-step chains in the workflows stage (default 20)")
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
        herd=args.herd or (10_000 if quick else 100_000),
        dispatchers_backlog=args.dispatchers_backlog or (8_000 if quick else 40_000),
        herd_tenants=args.herd_tenants or (100 if quick else 500),
        fair_backlog=500 if quick else 2_000,
        noisy_backlog=5_000 if quick else 20_000,
        cron_schedules=args.schedules or 10_000,
        cron_herd=args.cron_herd or (20_000 if quick else 100_000),
        retention_volume=args.retention_volume or (20_000 if quick else 200_000),
        history_rows=args.history_rows or (100_000 if quick else 10_000_000),
        workflow_chains=args.workflow_chains or (6 if quick else 20),
        workflow_steps=10,  # the figure is on a 10-step chain
        # A chain every 0.5 s: with the one-offs beside them, 40 starts a second and a few chains
        # in flight at once. Well under what the workers take even on a busy machine: at 80 a
        # second on a loaded 2-CPU VM both sides waited ~200 ms for a slot, and the figure was
        # that queue, not what a release costs. (A create through job_create also costs the
        # probe several times the lag feeder's one statement.)
        workflow_interval=0.5,
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
