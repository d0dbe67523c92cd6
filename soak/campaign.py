"""The soak itself: roles started, jobs submitted and faults injected on the plan's schedule, then
the audit of every job and execution and the report."""

import contextlib
import heapq
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from soak.api import Api
from soak.audit import JOB_STATES, Effect, Event, Execution, Figures, audit_cron, audit_execution
from soak.config import FAULTS, LEASE, OVERRUN_SECONDS, ROOT, TERMINAL, TIMINGS, Config, SoakError, log
from soak.plan import Planned, fault_times, plan
from soak.roles import Role, Roles, free_port, group_members, wait_until
from testing.pgbouncer import PgBouncer

# --- The soak ---------------------------------------------------------------------------------------


class Soak:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.log_dir = Path(tempfile.mkdtemp(prefix="tickwork-soak-"))
        # With --pgbouncer the roles reach PostgreSQL through a PgBouncer in transaction mode, as
        # production may run them (README, "PgBouncer"); the audit's connection goes direct.
        self.pooler = PgBouncer.upstream_of(cfg.db_url).start() if cfg.pgbouncer else None
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
        if self.pooler is not None:
            env.update(DATABASE_URL=self.pooler.url(self.cfg.db_url), DATABASE_DIRECT_URL=self.cfg.db_url)
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
        # An execution on the happy path has no event rows: its columns tell its history
        # (store/history.py, which needs Django; the same four events here, id 0).
        for execution_id, state, attempt, worker, made, queued, started, finished in self.conn.execute(
            "SELECT id::text, state, attempt, worker_id, created_at, queued_at, started_at, finished_at"
            " FROM executions_execution WHERE history_derived"
        ):
            derived = [Event(0, made, "", "PENDING", 1, "")]
            if state in ("QUEUED", "RUNNING", "SUCCEEDED"):
                derived.append(Event(0, queued, "PENDING", "QUEUED", attempt, ""))
            if state in ("RUNNING", "SUCCEEDED"):
                derived.append(Event(0, started, "QUEUED", "RUNNING", attempt, worker, "started"))
            if state == "SUCCEEDED":
                derived.append(Event(0, finished, "RUNNING", "SUCCEEDED", attempt, worker, "succeeded"))
            events[execution_id] = derived
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
        jobs = {job_id: (state, created_at) for job_id, state, created_at in self.conn.execute(JOB_STATES)}
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
