#!/usr/bin/env python
"""Tickwork's fault-injection soak: every role as production runs it, a few thousand jobs through
the API, and faults while they run; then an audit of what happened (soak/audit.py).

    .venv/bin/python soak/run.py                 # `make soak`: 8 minutes, 3,000 jobs
    .venv/bin/python soak/run.py --short         # `make soak-short`: a minute, 300 jobs (CI)

Roles (README, "Production deployment"): web (daphne on a free port of 127.0.0.1), two
dispatchers, two sweepers and two Celery prefork workers, on PostgreSQL and Redis, with the short
leases and graces of the end-to-end tests. Faults, spread over the run and each kind at least
once: a worker's process group killed (SIGKILL) and restarted, one of its pool processes killed,
a worker frozen (SIGSTOP) for twice the lease and resumed, a dispatcher and a sweeper killed and
restarted, the broker's database flushed, every connection to the database cut (what a
PostgreSQL restart does to the roles). The soak stops by itself, stops every process it
started (SIGTERM, then SIGKILL, even on failure or Ctrl-C) and drops its database.

Environment: SOAK_POSTGRES_URL (a database on the server to connect to for CREATE and DROP,
default postgres://postgres@127.0.0.1:5432/postgres), SOAK_DB_NAME (created and dropped; must
contain "soak"; default tickwork_soak), SOAK_BROKER_URL (a Redis database of its own, flushed;
default redis://127.0.0.1:6379/12). Exit status: 0 when the audit finds nothing, 1 when it finds
a violation, 2 when the soak itself could not run.
"""

import argparse
import contextlib
import heapq
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from soak.audit import Effect, Event, Execution, Figures, audit_cron, audit_execution  # noqa: E402

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
    )


# --- Processes --------------------------------------------------------------------------------------


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


@dataclass
class Role:
    name: str
    kind: str  # web, dispatcher, sweeper, worker
    argv: list[str]
    popen: subprocess.Popen | None = None
    expected_exit: bool = False  # killed by the soak, not dead on its own
    frozen_until: float | None = None

    @property
    def pgid(self) -> int:
        return self.popen.pid  # a session of its own: the leader's pid is the group's id

    def members(self) -> list[int]:
        return group_members(self.pgid)

    def signal(self, sig: signal.Signals) -> None:
        # Only while the group has members: the id of a group that is gone may be reused.
        if self.members():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pgid, sig)

    def wait_gone(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while self.members() and time.monotonic() < deadline:
            time.sleep(0.02)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=1)


class Roles:
    """Every process the soak starts, each in a session of its own so that a signal to its group
    reaches its children (a Celery worker's pool) and nothing else."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.roles: list[Role] = []
        self.unexpected_exits: list[str] = []
        self.stopped = False

    def add(self, name: str, kind: str, argv: list[str]) -> Role:
        role = Role(name=name, kind=kind, argv=argv)
        self.roles.append(role)
        self.start(role)
        return role

    def start(self, role: Role) -> None:
        with open(self.log_dir / f"{role.name}.log", "ab") as out:
            role.popen = subprocess.Popen(
                role.argv,
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        role.expected_exit = False

    def of(self, kind: str) -> list[Role]:
        return [role for role in self.roles if role.kind == kind]

    def log_of(self, role: Role) -> str:
        path = self.log_dir / f"{role.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, role: Role) -> None:
        """SIGKILL the role's whole group and wait until it is gone."""
        role.expected_exit = True
        role.signal(signal.SIGKILL)
        role.wait_gone()
        role.frozen_until = None

    def watch(self) -> None:
        """A role that exits without the soak killing it is a finding: note it and restart it."""
        for role in self.roles:
            if role.popen.poll() is not None and not role.expected_exit:
                tail = "\n    ".join(self.log_of(role).splitlines()[-15:])
                self.unexpected_exits.append(f"{role.name} exited on its own with {role.popen.returncode}")
                log(f"{self.unexpected_exits[-1]}; restarting it. Its log ends:\n    {tail}")
                role.signal(signal.SIGKILL)  # what is left of it (a worker's pool processes)
                role.wait_gone()
                self.start(role)

    def stop_all(self, *, term_timeout: float = 10.0) -> list[str]:
        """SIGCONT and SIGTERM to every role's group, SIGKILL to what is left; returns the
        processes that survived both. Once only: a group id is not to be signalled once gone."""
        if self.stopped:
            return []
        self.stopped = True
        for role in self.roles:
            role.expected_exit = True
            role.signal(signal.SIGCONT)
            role.signal(signal.SIGTERM)
        deadline = time.monotonic() + term_timeout
        while time.monotonic() < deadline and any(role.members() for role in self.roles):
            time.sleep(0.1)
        for role in self.roles:
            if role.members():
                role.signal(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(role.members() for role in self.roles):
            time.sleep(0.1)
        for role in self.roles:
            with contextlib.suppress(subprocess.TimeoutExpired):
                role.popen.wait(timeout=1)
        return [f"{role.name}: {role.members()}" for role in self.roles if role.members()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate: Callable[[], object], *, timeout: float, what: str, interval: float = 0.2) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SoakError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


# --- The API ----------------------------------------------------------------------------------------


class Api:
    """The tenants' HTTP clients (standard library). Creates carry an Idempotency-Key, so a retry
    after a lost answer cannot create a job twice."""

    ATTEMPTS = 10

    def __init__(self, base: str) -> None:
        self.base = base
        self.deadline = float("inf")  # monotonic time after which a failed call is not repeated
        self.errors: list[str] = []
        self.unavailable = 0  # answers 503: the web says the database is out of reach for now

    def call(self, method: str, path: str, token: str, body: dict | None = None, key: str = "") -> tuple[int, dict]:
        """The answer's status and JSON body; 0 when there was none. Every call the soak makes may
        be repeated (creates carry a key, a cancel asked twice is not an error): a 503 is retried
        when its Retry-After says, and so is any other 5xx or a failed connection, which is also
        reported, since the web role is not faulted."""
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        if key:
            headers["Idempotency-Key"] = key
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(1, self.ATTEMPTS + 1):
            request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
            retry_after = 0.5 * attempt
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as exc:
                text = exc.read().decode(errors="replace")
                if exc.code < 500:
                    return exc.code, json.loads(text) if text.startswith("{") else {"detail": text}
                if exc.code == 503:
                    self.unavailable += 1
                    with contextlib.suppress(TypeError, ValueError):
                        retry_after = min(5.0, float(exc.headers.get("Retry-After")))
                else:
                    self.errors.append(f"{method} {path}: {exc.code} {' '.join(text.split())[:200]} (try {attempt})")
            except (OSError, ValueError) as exc:
                self.errors.append(f"{method} {path}: {exc.__class__.__name__}: {exc} (try {attempt})")
            if time.monotonic() > self.deadline:
                break
            time.sleep(retry_after)
        self.errors.append(f"{method} {path}: no answer after {attempt} tries")
        return 0, {}


# --- The plan ---------------------------------------------------------------------------------------


@dataclass
class Planned:
    """A job the soak submits, and what it did to it."""

    kind: str
    token: str
    body: dict
    at: float  # seconds into the run at which it is submitted
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    job_id: str = ""
    cancel_answer: str = ""  # cancel-running: the execution's state in the cancel's answer


def plan(cfg: Config, tokens: list[str], rng: random.Random) -> list[Planned]:
    """The jobs, each with the moment it is submitted: one-off ones spread over the run, due
    within seconds of their submission; the cron jobs first."""
    kinds = rng.choices(list(KINDS), weights=list(KINDS.values()), k=cfg.jobs)
    # Each kind at least once, whatever the count.
    kinds[: len(KINDS)] = list(KINDS)
    jobs = []
    for n, kind in enumerate(kinds):
        at = rng.uniform(0, cfg.seconds)
        payload: dict = {"seconds": round(rng.uniform(0, 0.2), 3)}
        body: dict = {"name": f"soak {kind} {n}", "target": {"handler": "soak-effect"}, "retryPolicy": RETRY}
        if kind == "once":
            due = time.time() + at + rng.uniform(0, 5)
            body.update(type="ONCE", runAt=datetime.fromtimestamp(due, UTC).isoformat())
        elif kind == "cancel-pending":
            body.update(type="ONCE", runAt=datetime.fromtimestamp(time.time() + 3600, UTC).isoformat())
        else:
            body.update(type="DELAYED", delaySec=rng.randint(0, 3) if kind != "cancel-running" else 0)
        if kind == "flaky":
            payload["failTimes"] = rng.randint(1, 2)
        elif kind in ("slow", "cancel-running"):
            payload["seconds"] = round(rng.uniform(1.5, 4.0), 2)
        body["payload"] = payload
        body["timeoutSec"] = 300
        jobs.append(Planned(kind=kind, token=tokens[n % len(tokens)], body=body, at=at))
    zones = ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]
    for n in range(cfg.cron_jobs):
        body = {
            "name": f"soak cron {n}",
            "type": "CRON",
            "schedule": "* * * * *",
            "timezone": zones[n % len(zones)],
            "target": {"handler": "soak-effect"},
            "payload": {"seconds": 0.05},
            "retryPolicy": RETRY,
            # Every fire runs, also those a dispatcher outage made late: none may go missing.
            "misfirePolicy": "RUN_ALL",
            "timeoutSec": 300,
        }
        jobs.append(Planned(kind="cron", token=tokens[n % len(tokens)], body=body, at=0.0))
    return sorted(jobs, key=lambda job: job.at)


def fault_times(cfg: Config, rng: random.Random) -> list[tuple[float, str]]:
    """Faults spread over the run after its first tenth, every kind at least once and in a random
    order; about one every 15 s."""
    start, end = cfg.seconds * 0.1, cfg.seconds
    count = max(len(FAULTS), int((end - start) / 15))
    kinds = list(FAULTS) + rng.choices(FAULTS, k=count - len(FAULTS))
    rng.shuffle(kinds)
    step = (end - start) / count
    return [(start + i * step + rng.uniform(0, step * 0.5), kind) for i, kind in enumerate(kinds)]


# --- The soak ---------------------------------------------------------------------------------------


class Soak:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.log_dir = Path(tempfile.mkdtemp(prefix="tickwork-soak-"))
        self.env = self._env()
        self.roles = Roles(self.env, self.log_dir)
        self.conn = None
        self.api: Api | None = None
        self.jobs: list[Planned] = []
        self.faults: Counter = Counter()
        self.last_fault_end = 0.0
        self.started = 0.0
        self.settled_at: float | None = None
        self.cron_cancelled_at: datetime | None = None
        # (seconds into the run, sequence, whether it is an API call, action)
        self.timeline: list[tuple[float, int, bool, Callable[[], None]]] = []
        self.timeline_lock = threading.Lock()
        self.sequence = 0
        self.findings: list[str] = []  # what the run itself ran into

    def _env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            # The roles get exactly the configuration below, not the caller's.
            if not key.startswith(("TICKWORK_", "CELERY_", "DJANGO_", "DATABASE_", "SOAK_")) and key != "REDIS_URL"
        }
        env.update({key: str(value) for key, value in TIMINGS.items()})
        env.update(
            DJANGO_SETTINGS_MODULE="scheduler_project.settings",
            DATABASE_URL=self.cfg.db_url,
            CELERY_BROKER_URL=self.cfg.broker_url,
            TICKWORK_VAR_DIR=str(self.log_dir / "var"),
            TICKWORK_LOG_LEVEL="INFO",
            PYTHONUNBUFFERED="1",
        )
        return env

    # --- setting up

    def create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.cfg.postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.cfg.db_name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{self.cfg.db_name}"')
            # The soak is about coordination between processes, not about PostgreSQL surviving an
            # OS crash; a WAL flush per commit would only slow the small shared machine down.
            admin.execute(f'ALTER DATABASE "{self.cfg.db_name}" SET synchronous_commit = off')
        self.manage("migrate", "-v", "0")
        self.conn = psycopg.connect(self.cfg.db_url, autocommit=True)
        self.conn.execute(
            "CREATE TABLE soak_effect (id bigserial PRIMARY KEY, execution_id uuid NOT NULL,"
            " attempt integer NOT NULL, worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )

    def drop_database(self) -> None:
        import psycopg

        if self.conn is not None:
            self.conn.close()
        with psycopg.connect(self.cfg.postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.cfg.db_name}" WITH (FORCE)')

    def flush_broker(self) -> None:
        import redis

        client = redis.Redis.from_url(self.cfg.broker_url)
        try:
            client.flushdb()
        finally:
            client.close()

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )
        if done.returncode:
            raise SoakError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def tenants(self) -> list[str]:
        tokens = []
        for slug in ("soak-red", "soak-blue"):
            self.manage("create_tenant", slug)
            tokens.append(self.manage("create_token", slug).strip().splitlines()[-1])
        return tokens

    def start_roles(self) -> None:
        port = free_port()
        self.api = Api(f"http://127.0.0.1:{port}")
        python = sys.executable
        self.roles.add(
            "web", "web", [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "soak.asgi:application"]
        )
        for n in (1, 2):
            self.roles.add(f"dispatcher{n}", "dispatcher", [python, "manage.py", "run_dispatcher"])
            self.roles.add(f"sweeper{n}", "sweeper", [python, "manage.py", "run_sweeper"])
        for n in range(1, self.cfg.workers + 1):
            # Mingle, gossip and event heartbeats are Celery's worker-to-worker chatter, which
            # Tickwork does not use: off, to spare the CPU (as the end-to-end tests do).
            argv = [
                python, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", "tickwork.default",
                "-P", "prefork", "-c", str(self.cfg.concurrency), "-n", f"soak-worker{n}@%h",
                "--include", "soak.handlers", "--without-mingle", "--without-gossip", "--without-heartbeat",
                "-l", "INFO",
            ]  # fmt: skip
            self.roles.add(f"worker{n}", "worker", argv)
        for role in self.roles.roles:
            self.wait_ready(role, timeout=120)

    def wait_ready(self, role: Role, *, timeout: float) -> None:
        def ready() -> bool:
            if role.popen.poll() is not None:
                raise SoakError(f"{role.name} exited with {role.popen.returncode}:\n{self.roles.log_of(role)[-3000:]}")
            if role.kind == "web":
                with contextlib.suppress(OSError):
                    with urllib.request.urlopen(self.api.base + "/v1/health", timeout=5) as response:
                        return response.status == 200
                return False
            if role.kind == "worker":
                return " ready." in self.roles.log_of(role) and len(group_members(role.pgid)) > self.cfg.concurrency
            return f"{role.kind} started" in self.roles.log_of(role)

        wait_until(ready, timeout=timeout, what=f"{role.name} to start")

    # --- the run

    def at(self, when: float, action: Callable[[], None], *, api: bool = True) -> None:
        """Run `action` `when` seconds into the run: an API call on the clients' threads, a fault
        (api=False) on the main thread, which alone touches the roles."""
        with self.timeline_lock:
            self.sequence += 1
            heapq.heappush(self.timeline, (when, self.sequence, api, action))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def submit(self, job: Planned) -> None:
        status, answer = self.api.call("POST", "/v1/jobs", job.token, job.body, key=job.key)
        if status not in (200, 201):
            self.api.errors.append(f"create {job.body['name']}: {status} {answer}")
            return
        job.job_id = answer["jobId"]
        if job.kind == "cancel-pending":
            self.at(min(self.cfg.seconds, job.at + self.rng.uniform(1, 20)), lambda: self.delete(job))
        elif job.kind == "cancel-running":
            self.at(self.elapsed() + self.rng.uniform(0.2, 3.0), lambda: self.cancel(job))

    def delete(self, job: Planned) -> None:
        status, answer = self.api.call("DELETE", f"/v1/jobs/{job.job_id}", job.token)
        if status not in (200, 204):
            self.api.errors.append(f"cancel job {job.body['name']}: {status} {answer}")

    def cancel(self, job: Planned) -> None:
        status, answer = self.api.call("GET", f"/v1/jobs/{job.job_id}", job.token)
        executions = answer.get("latestExecutions") or []
        if status != 200 or not executions:
            self.api.errors.append(f"read job {job.body['name']}: {status} {answer}")
            return
        status, answer = self.api.call("POST", f"/v1/executions/{executions[0]['executionId']}/cancel", job.token)
        if status == 202:
            job.cancel_answer = answer.get("state", "")
        elif status != 409:  # 409: it had finished already
            self.api.errors.append(f"cancel {job.body['name']}: {status} {answer}")

    def pick_worker(self) -> tuple[Role, int | None]:
        """A worker that is not frozen, and its pool process that runs a handler now: preferably
        one that does, since a fault that cuts a run short is the one that tests something."""
        workers = [role for role in self.roles.of("worker") if role.frozen_until is None]
        running = {
            int(worker.rsplit(":", 1)[1])
            for (worker,) in self.conn.execute(
                "SELECT worker_id FROM executions_execution WHERE state = 'RUNNING' AND worker_id LIKE '%:%'"
            )
        }
        busy = [(role, pid) for role in workers for pid in role.members() if pid in running and pid != role.pgid]
        if busy:
            return self.rng.choice(busy)
        return self.rng.choice(workers), None

    def fault(self, kind: str) -> None:
        if kind in ("kill-worker", "kill-worker-process", "freeze-worker"):
            if all(role.frozen_until is not None for role in self.roles.of("worker")):
                kind = "kill-dispatcher"  # every worker is frozen: take something else down
            else:
                role, busy_pid = self.pick_worker()
        target = ""
        if kind == "kill-worker":
            self.roles.kill(role)
            self.roles.start(role)
            target = f"{role.name}{' while it ran a handler' if busy_pid else ''}"
        elif kind == "kill-worker-process":
            pid = busy_pid or self.rng.choice([pid for pid in role.members() if pid != role.pgid] or [0])
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # Celery replaces its pool process
            target = f"{pid} of {role.name}{' while it ran a handler' if busy_pid else ''}"
        elif kind == "freeze-worker":
            role.signal(signal.SIGSTOP)
            role.frozen_until = time.monotonic() + 2 * LEASE
            self.at(self.elapsed() + 2 * LEASE, lambda: self.thaw(role), api=False)
            target = f"{role.name} for {2 * LEASE:g}s{' while it ran a handler' if busy_pid else ''}"
        elif kind in ("kill-dispatcher", "kill-sweeper"):
            role = self.rng.choice(self.roles.of(kind.split("-")[1]))
            self.roles.kill(role)
            self.roles.start(role)
            target = role.name
        elif kind == "flush-broker":
            self.flush_broker()
        elif kind == "drop-db-connections":
            # What a PostgreSQL restart does to the roles, without restarting a server that
            # others may share: every connection to the soak's database is cut.
            self.conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [self.cfg.db_name],
            )
        self.faults[kind] += 1
        self.last_fault_end = max(self.last_fault_end, self.elapsed())
        log(f"fault: {kind} {target}")

    def thaw(self, role: Role) -> None:
        if role.frozen_until is not None:
            role.signal(signal.SIGCONT)
            role.frozen_until = None
            self.last_fault_end = max(self.last_fault_end, self.elapsed())

    def run(self) -> None:
        tokens = self.tenants()
        self.start_roles()
        self.jobs = plan(self.cfg, tokens, self.rng)
        log(
            f"roles up; {len(self.jobs)} jobs to submit and faults to inject over {self.cfg.seconds:.0f}s"
            f" (seed {self.cfg.seed}, logs in {self.log_dir})"
        )
        self.started = time.monotonic()
        for job in self.jobs:
            self.at(job.at, lambda job=job: self.submit(job))
        for when, kind in fault_times(self.cfg, self.rng):
            self.at(when, lambda kind=kind: self.fault(kind), api=False)
        calls = []
        # Bounded in time whatever the web does: past the overrun nothing more is asked of it.
        overrun = self.cfg.seconds + OVERRUN_SECONDS
        self.api.deadline = self.started + overrun
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="api") as pool:
            # Until nothing is left to do and no call is under way (a create's answer may add a
            # cancel to the timeline): the last fault ends the run.
            while self.timeline or calls:
                if self.elapsed() > overrun:
                    left = len(self.timeline)
                    self.findings.append(f"the run overran by {OVERRUN_SECONDS}s; {left} actions left undone")
                    pool.shutdown(cancel_futures=True)
                    break
                with self.timeline_lock:
                    due = []
                    while self.timeline and self.timeline[0][0] <= self.elapsed():
                        due.append(heapq.heappop(self.timeline)[2:])
                for api, action in due:
                    if api:
                        calls.append(pool.submit(action))
                    else:
                        action()
                for call in [call for call in calls if call.done()]:
                    call.result()  # an error in the soak's own code stops it
                calls = [call for call in calls if not call.done()]
                self.roles.watch()
                time.sleep(0.05)
        self.finish()

    def finish(self) -> None:
        """Every role up again, the cron jobs cancelled once their due fires are claimed, and
        then wait for every execution to reach a terminal state."""
        for role in self.roles.of("worker"):
            self.thaw(role)
        self.roles.watch()
        log("submissions and faults done; waiting for the cron jobs' due fires to be claimed")
        cron_ids = [job.job_id for job in self.jobs if job.kind == "cron" and job.job_id]
        try:
            wait_until(
                lambda: self.scalar(
                    "SELECT count(*) = 0 FROM executions_execution WHERE job_id = ANY(%s::uuid[])"
                    " AND state = 'PENDING' AND available_at <= now()",
                    [cron_ids],
                ),
                timeout=60,
                what="the cron jobs' due fires to be claimed",
            )
        except SoakError as exc:
            self.findings.append(str(exc))
        self.cron_cancelled_at = self.scalar("SELECT now()")
        for job in self.jobs:
            if job.kind == "cron" and job.job_id:
                self.delete(job)
        log("cron jobs cancelled; waiting for every execution to settle")
        deadline = time.monotonic() + self.cfg.settle_timeout
        while time.monotonic() < deadline:
            self.roles.watch()
            if not self.unsettled():
                self.settled_at = self.elapsed()
                return
            time.sleep(0.25)

    def scalar(self, sql: str, params=None):
        return self.conn.execute(sql, params).fetchone()[0]

    def unsettled(self) -> int:
        return self.scalar("SELECT count(*) FROM executions_execution WHERE state <> ALL(%s)", [list(TERMINAL)])

    # --- the audit

    def audit(self) -> Figures:
        figures = Figures()
        say = figures.violations.append
        rows = self.conn.execute(
            "SELECT id::text, job_id::text, state, attempt, worker_id, result, scheduled_for, origin"
            " FROM executions_execution"
        ).fetchall()
        events: dict[str, list[Event]] = {}
        for row in self.conn.execute(
            "SELECT execution_id::text, id, at, from_state, to_state, attempt, worker_id, message"
            " FROM executions_executionevent ORDER BY id"
        ):
            events.setdefault(row[0], []).append(Event(*row[1:]))
        effects: dict[str, list[Effect]] = {}
        for execution_id, at, attempt, worker in self.conn.execute(
            "SELECT execution_id::text, at, attempt, worker FROM soak_effect ORDER BY id"
        ):
            effects.setdefault(execution_id, []).append(Effect(at=at, attempt=attempt, worker=worker))
        by_job: dict[str, list[Execution]] = {}
        origins = {}
        for execution_id, job_id, state, attempt, worker, result, scheduled_for, origin in rows:
            by_job.setdefault(job_id, []).append(
                Execution(
                    id=execution_id,
                    state=state,
                    attempt=attempt,
                    worker=worker,
                    result=result,
                    events=events.get(execution_id, []),
                    effects=effects.get(execution_id, []),
                    scheduled_for=scheduled_for,
                )
            )
            origins[execution_id] = origin
        known = {row[0] for row in rows}
        for execution_id in set(effects) - known:
            say(f"effects of an execution that does not exist: {execution_id}")
        jobs = {
            job_id: (state, created_at)
            for job_id, state, created_at in self.conn.execute("SELECT id::text, state, created_at FROM jobs_job")
        }
        submitted = {job.job_id for job in self.jobs if job.job_id}
        for job_id in set(jobs) - submitted:
            say(f"job {job_id} exists but the soak did not get it back from a create (a create counted twice?)")
        for job in self.jobs:
            if not job.job_id:
                continue
            executions = by_job.get(job.job_id, [])
            job_state, created_at = jobs[job.job_id]
            if job.kind == "cron":
                if job_state != "CANCELLED":
                    say(f"cron job {job.job_id} is {job_state} after its cancel")
                if any(origins[e.id] != "SCHEDULE" for e in executions):
                    say(f"cron job {job.job_id} has executions the soak did not trigger")
                audit_cron(
                    job_id=job.job_id,
                    schedule=job.body["schedule"],
                    timezone=job.body["timezone"],
                    created_at=created_at,
                    cancelled_at=self.cron_cancelled_at,
                    fires=executions,
                    figures=figures,
                )
                continue
            if len(executions) != 1:
                say(f"job {job.job_id} ({job.kind}) has {len(executions)} executions, expected 1")
            allowed, may_run, job_states = {
                "cancel-pending": ({"CANCELLED"}, False, {"CANCELLED"}),
                # Cancelled when the answer says so; if it was running then, it may have succeeded.
                "cancel-running": (
                    {"CANCELLED"} if job.cancel_answer == "CANCELLED" else {"CANCELLED", "SUCCEEDED"},
                    True,
                    {"COMPLETED"},
                ),
            }.get(job.kind, ({"SUCCEEDED"}, True, {"COMPLETED"}))
            if job_state not in job_states:
                say(f"job {job.job_id} ({job.kind}) is {job_state}, expected {' or '.join(sorted(job_states))}")
            for execution in executions:
                audit_execution(execution, allowed=frozenset(allowed), may_run=may_run, figures=figures)
        return figures

    def report(self, figures: Figures) -> bool:
        cfg = self.cfg
        kinds = Counter(job.kind for job in self.jobs)
        submitted = sum(1 for job in self.jobs if job.job_id)
        moves = figures.moves
        violations = [
            *self.findings,
            *figures.violations,
            *(f"API: {error}" for error in self.api.errors),
            *(f"role: {exit}" for exit in self.roles.unexpected_exits),
        ]
        if self.settled_at is None:
            violations.append(f"not settled within {cfg.settle_timeout:.0f}s: {self.unsettled_by_state()}")
        print()
        print(
            f"Tickwork soak: {cfg.minutes:g} min of submissions and faults, seed {cfg.seed};"
            f" {cfg.workers} workers x {cfg.concurrency}, 2 dispatchers, 2 sweepers, 1 web;"
            f" lease {LEASE:g}s"
        )
        print(
            f"jobs: {submitted:,} of {len(self.jobs):,} submitted ("
            + ", ".join(f"{kind} {count}" for kind, count in kinds.items())
            + f"); executions {figures.executions:,}, cron fires {figures.cron_fires}"
        )
        print("final states: " + ", ".join(f"{state} {count:,}" for state, count in sorted(figures.states.items())))
        print(
            f"faults: {sum(self.faults.values())} (" + ", ".join(f"{kind} {self.faults[kind]}" for kind in FAULTS) + ")"
        )
        print(
            f"reclaims (RUNNING → FAILED_WORKER_LOST): {figures.reclaims}; timeouts: {moves['RUNNING', 'TIMED_OUT']};"
            f" re-publishes: {moves['QUEUED', 'QUEUED']}; handler failures retried: {moves['FAILED', 'PENDING']};"
            f" cancelled while running: {moves['RUNNING', 'CANCELLED']}"
        )
        print(
            f"effects: {figures.effects:,}; duplicate effects: {figures.duplicate_effects}"
            f" (explained by a reclaim {figures.duplicate_effects - figures.unexplained_effects},"
            f" unexplained {figures.unexplained_effects})"
        )
        print(f"cron: {figures.cron_fires} fires, doubled {figures.cron_doubled}, skipped {figures.cron_skipped}")
        print(f"API: {self.api.unavailable} answers 503 (retried), {len(self.api.errors)} failed calls (violations)")
        worker_logs = "".join(self.roles.log_of(role) for role in self.roles.of("worker"))
        print(
            "fencing: stale outcomes refused by the lease token"
            f" {worker_logs.count('finished after its lease moved on; outcome discarded')},"
            f" handlers stopped by a heartbeat that found the lease lost {worker_logs.count(': lease lost: ')}"
        )
        if self.settled_at is not None:
            print(f"settle time: {self.settled_at - self.last_fault_end:.1f}s from the end of the last fault")
        print(f"violations: {len(violations)}")
        for violation in violations[:50]:
            print(f"  - {violation}")
        if len(violations) > 50:
            print(f"  … and {len(violations) - 50} more")
        print("PASS" if not violations else "FAIL")
        return not violations

    def unsettled_by_state(self) -> str:
        rows = self.conn.execute(
            "SELECT state, count(*) FROM executions_execution WHERE state <> ALL(%s) GROUP BY state", [list(TERMINAL)]
        ).fetchall()
        return ", ".join(f"{state} {count}" for state, count in rows)


def main(argv: list[str]) -> int:
    cfg = parse_args(argv)

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    soak = Soak(cfg)
    passed = False
    try:
        log(f"creating database {cfg.db_name}; broker {cfg.broker_url}")
        soak.flush_broker()
        soak.create_database()
        soak.run()
        survivors = soak.roles.stop_all()
        if survivors:
            raise SoakError(f"processes survived SIGTERM and SIGKILL: {survivors}")
        passed = soak.report(soak.audit())
        return 0 if passed else 1
    except SoakError as exc:
        log(f"the soak could not run: {exc}")
        return 2
    except Exception:
        log(f"the soak could not run:\n{traceback.format_exc()}")
        return 2
    finally:
        soak.roles.stop_all()
        with contextlib.suppress(Exception):
            soak.flush_broker()
        if cfg.keep:
            log(f"kept database {cfg.db_name}")
        else:
            try:
                soak.drop_database()
            except Exception as exc:  # the verdict stands; say what is left behind
                log(f"could not drop {cfg.db_name}: {exc}")
        if passed and not cfg.keep:
            shutil.rmtree(soak.log_dir, ignore_errors=True)
        else:
            log(f"the roles' logs are in {soak.log_dir}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
