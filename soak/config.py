"""The soak's configuration: its command line, the roles' timings, the faults and the kinds of job."""

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent


# The end-to-end tests' timings (testing/fixtures.py): faults resolve in seconds.
TIMINGS = {
    "TICKWORK_LEASE_SECONDS": 3.0,
    "TICKWORK_CANCEL_GRACE_SECONDS": 1.0,
    "TICKWORK_PUBLISH_GRACE_SECONDS": 2.0,
    "TICKWORK_POLL_SECONDS": 0.2,
    "TICKWORK_SWEEP_SECONDS": 0.5,
}
LEASE = TIMINGS["TICKWORK_LEASE_SECONDS"]
FAULTS = (
    "kill-worker",
    "kill-worker-process",
    "freeze-worker",
    "kill-dispatcher",
    "kill-sweeper",
    "flush-broker",
    "drop-db-connections",
)
# One-off kinds and their share of the jobs; the rest of the jobs' mix is a few cron jobs.
KINDS = {
    "once": 0.30,  # ONCE, due within seconds
    "delayed": 0.25,  # DELAYED
    "flaky": 0.20,  # fails its first one or two attempts, then succeeds
    "slow": 0.10,  # runs for seconds: what the faults most often cut short
    "cancel-pending": 0.075,  # due in an hour; the job is cancelled (DELETE) before
    "cancel-running": 0.075,  # runs for seconds; its execution is cancelled meanwhile
}
RETRY = {"maxAttempts": 20, "backoff": "FIXED", "initialDelayMs": 300, "maxDelayMs": 300, "jitter": False}
TERMINAL = ("SUCCEEDED", "CANCELLED", "DEAD")
OVERRUN_SECONDS = 120  # how far past --minutes submissions and faults may run before they are cut


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class SoakError(Exception):
    """The soak could not run (a role did not start, the database refused): not a verdict."""


# --- Configuration ----------------------------------------------------------------------------------


@dataclass
class Config:
    minutes: float
    jobs: int
    cron_jobs: int
    workers: int
    concurrency: int
    settle_timeout: float
    seed: int
    keep: bool
    postgres_url: str
    db_name: str
    broker_url: str
    pgbouncer: bool = False

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    @property
    def db_url(self) -> str:
        parts = urlsplit(self.postgres_url)
        return urlunsplit((parts.scheme, parts.netloc, f"/{self.db_name}", parts.query, ""))


def parse_args(argv: list[str]) -> Config:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="the CI version: 1 minute, 300 jobs")
    parser.add_argument("--minutes", type=float, help="how long jobs are submitted and faults injected (8)")
    parser.add_argument("--jobs", type=int, help="one-off jobs submitted (3000)")
    parser.add_argument("--cron-jobs", type=int, help="cron jobs, every minute, created first (12)")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers, at least 2 (2)")
    parser.add_argument("--concurrency", type=int, default=2, help="prefork processes per worker (2)")
    parser.add_argument("--settle-timeout", type=float, default=180, help="seconds allowed to settle (180)")
    parser.add_argument("--seed", type=int, help="random seed (printed, for a rerun)")
    parser.add_argument("--keep", action="store_true", help="keep the database and the roles' logs, to look into")
    parser.add_argument(
        "--pgbouncer", action="store_true", help="the roles through a PgBouncer (transaction mode) the soak starts"
    )
    args = parser.parse_args(argv)
    db_name = os.environ.get("SOAK_DB_NAME", "tickwork_soak")
    if args.jobs is not None and args.jobs < len(KINDS):
        parser.error(f"--jobs must be at least {len(KINDS)}: one of each kind")
    if args.workers < 2:
        parser.error("--workers must be at least 2: one is frozen or killed while the others run")
    if "soak" not in db_name:
        parser.error("SOAK_DB_NAME must contain 'soak': the soak drops it")
    postgres_url = os.environ.get("SOAK_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    if urlsplit(postgres_url).scheme not in ("postgres", "postgresql"):
        parser.error("SOAK_POSTGRES_URL must point to PostgreSQL (postgres://user@host:port/database)")
    broker_url = os.environ.get("SOAK_BROKER_URL", "redis://127.0.0.1:6379/12")
    if urlsplit(broker_url).scheme != "redis" or not urlsplit(broker_url).path.strip("/").isdigit():
        parser.error("SOAK_BROKER_URL must be a Redis database of the soak's own (redis://host:port/db): it is flushed")
    return Config(
        minutes=args.minutes or (1.0 if args.short else 8.0),
        jobs=args.jobs or (300 if args.short else 3000),
        cron_jobs=args.cron_jobs if args.cron_jobs is not None else (6 if args.short else 12),
        workers=args.workers,
        concurrency=args.concurrency,
        settle_timeout=args.settle_timeout,
        seed=args.seed if args.seed is not None else random.randrange(1_000_000),
        keep=args.keep,
        postgres_url=postgres_url,
        db_name=db_name,
        broker_url=broker_url,
        pgbouncer=args.pgbouncer,
    )
