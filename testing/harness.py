"""Real processes for end-to-end tests: Celery workers, dispatchers and sweepers as subprocesses.

Each role runs in its own session (so its process group is the role with all its children:
a Celery worker's prefork children go with it), logs to a file under the test's tmp dir, and
is stopped at teardown with SIGTERM, then SIGKILL. `Live.stop_all` reports any survivor.
"""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.db import close_old_connections, connection

from testing import zygote

ROOT = Path(__file__).resolve().parents[1]
# Imported by test workers (`celery worker --include`), so handlers that exist only for tests
# are registered in the workers without a hook in production code.
TEST_HANDLERS = "testing.handlers_for_tests"


def database_url() -> str:
    """The test database as a DATABASE_URL, for the roles' processes."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    auth = quote(s["USER"] or "", safe="")
    if s["PASSWORD"]:
        auth += ":" + quote(s["PASSWORD"], safe="")
    host = s["HOST"] or "127.0.0.1"
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgres://{auth}{'@' if auth else ''}{host}{port}/{s['NAME']}"


def filesystem_broker_options(var_dir: Path) -> dict:
    """kombu's filesystem transport options for the folders settings.py gives a TICKWORK_VAR_DIR."""
    (var_dir / "broker").mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(var_dir / "broker"),
        "data_folder_out": str(var_dir / "broker"),
        "processed_folder": str(var_dir / "broker-processed"),
        "control_folder": str(var_dir / "broker-control"),
        "store_processed": False,
    }


# executions.clock.db_now estimates the database's time from a measured instant and this process's
# monotonic clock: within a round trip of this process's wall clock, not ordered with it to the
# microsecond (CI saw a job's start 0.3 ms before the `timezone.now()` taken ahead of the request).
DB_CLOCK_SLACK = timedelta(seconds=1)


def within_db_clock(before: datetime, value: datetime, after: datetime) -> bool:
    """Whether `value`, an instant the server took with db_now, lies between `before` and `after`
    taken with this process's clock, within DB_CLOCK_SLACK."""
    return before - DB_CLOCK_SLACK <= value <= after + DB_CLOCK_SLACK


def wait_for(predicate: Callable[[], Any], *, timeout: float, interval: float = 0.05, what: str = "") -> Any:
    """Poll `predicate` until it returns something truthy, and return that. Fails after
    `timeout` seconds with `what` in the message (and the processes' log tails, via the fixture)."""
    deadline = time.monotonic() + timeout
    while True:
        close_old_connections()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def _pgrp_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in a process group. Orphaned children are reparented to an
    init that may never reap them, so a zombie does not count as a survivor."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may contain spaces: parse after the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            members.append(int(entry))
    return sorted(members)


class Proc:
    def __init__(
        self, *, name: str, role: str, popen: "subprocess.Popen | zygote.Forked", log_path: Path, concurrency: int = 0
    ) -> None:
        self.name = name
        self.role = role
        self.popen = popen
        self.log_path = log_path
        self.concurrency = concurrency  # a worker's prefork pool size

    @property
    def pgid(self) -> int:
        return self.popen.pid  # start_new_session: the leader's pid is the group id

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def members(self) -> list[int]:
        return _pgrp_members(self.pgid)

    def children(self) -> list[int]:
        """The prefork pool's processes, for a worker (everything in the group but the leader)."""
        return [pid for pid in self.members() if pid != self.pgid]

    def signal(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass

    def alive(self) -> bool:
        return self.popen.poll() is None


class Live:
    """Starts roles against the test database and a broker (a Redis DB, or the filesystem broker
    of TICKWORK_VAR_DIR `var_dir`), and stops them all."""

    def __init__(self, *, tmp_dir: Path, env: dict[str, str], broker_url: str, var_dir: Path | None = None) -> None:
        self.tmp_dir = tmp_dir
        self.base_env = env
        self.broker_url = broker_url
        self.var_dir = var_dir
        self.procs: list[Proc] = []
        self._app = None
        self._publisher = None

    # --- starting roles -----------------------------------------------------------------------

    def start(self, role: str, argv: list[str], *, name: str | None = None, env: dict | None = None) -> Proc:
        name = name or f"{role}{sum(p.role == role for p in self.procs) + 1}"
        log_path = self.tmp_dir / f"{name}.log"
        log = log_path.open("ab")
        popen = zygote.spawn(argv, cwd=ROOT, env={**self.base_env, **(env or {})}, stdout=log)
        log.close()
        proc = Proc(name=name, role=role, popen=popen, log_path=log_path)
        self.procs.append(proc)
        return proc

    def worker(self, *, name: str | None = None, concurrency: int = 2, env: dict | None = None, wait: bool = True):
        name = name or f"worker{sum(p.role == 'worker' for p in self.procs) + 1}"
        proc = self.start(
            "worker",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "scheduler_project",
                "worker",
                "-Q",
                "tickwork.default",
                "-P",
                "prefork",
                "-c",
                str(concurrency),
                "-n",
                f"{name}@%h",
                "--include",
                TEST_HANDLERS,
                "--without-mingle",
                "--without-gossip",
                "--without-heartbeat",
                "-l",
                "INFO",
            ],
            name=name,
            env=env,
        )
        proc.concurrency = concurrency
        if wait:
            self.wait_ready(proc, concurrency=concurrency)
        return proc

    def wait_ready(self, proc: Proc, *, concurrency: int, timeout: float = 60) -> None:
        def ready() -> bool:
            if not proc.alive():
                raise AssertionError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
            # Registered too: until its registry row is written, no work is admitted for its slots
            # (a claim right after " ready." could find no live worker and take nothing).
            log = proc.log()
            return " ready." in log and "registered for pools" in log and len(proc.children()) >= concurrency

        wait_for(ready, timeout=timeout, interval=0.1, what=f"{proc.name} to be ready")

    def dispatcher(self, *, name: str | None = None, env: dict | None = None) -> Proc:
        return self.start("dispatcher", [sys.executable, "manage.py", "run_dispatcher"], name=name, env=env)

    def sweeper(self, *, name: str | None = None, env: dict | None = None) -> Proc:
        return self.start("sweeper", [sys.executable, "manage.py", "run_sweeper"], name=name, env=env)

    def wait_started(self, proc: Proc, *, timeout: float = 60) -> None:
        """A dispatcher or sweeper logs '<role> started' when its loop begins."""

        def started() -> bool:
            if not proc.alive():
                raise AssertionError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
            return f"{proc.role} started" in proc.log()

        wait_for(started, timeout=timeout, interval=0.1, what=f"{proc.name} to start")

    def ready(self) -> None:
        """Wait until every role started so far is up. Starting them all first and then waiting
        lets their (CPU-bound) start-ups overlap."""
        for proc in self.procs:
            if proc.role == "worker":
                self.wait_ready(proc, concurrency=proc.concurrency)
            else:
                self.wait_started(proc)

    # --- talking to the workers ---------------------------------------------------------------

    @property
    def publisher(self):
        """A CeleryPublisher on the test broker, as a dispatcher would use."""
        if self._publisher is None:
            from celery import Celery

            from background.publisher import CeleryPublisher

            self._app = Celery("tickwork-tests", broker=self.broker_url, set_as_current=False)
            self._app.conf.task_ignore_result = True
            if self.broker_url.startswith("filesystem"):
                self._app.conf.broker_transport_options = filesystem_broker_options(self.var_dir)
            self._publisher = CeleryPublisher(app=self._app)
        return self._publisher

    def worker_of(self, worker_id: str) -> Proc:
        """The worker role whose prefork child wrote `worker_id` ("host:pid")."""
        pid = int(worker_id.rsplit(":", 1)[1])
        for proc in self.procs:
            if proc.role == "worker" and pid in proc.children():
                return proc
        raise AssertionError(f"no running worker has a child {pid}")

    # --- stopping -----------------------------------------------------------------------------

    def tails(self) -> str:
        return "\n".join(f"----- {p.name} ({p.log_path}) -----\n{p.tail()}" for p in self.procs)

    def stop_all(self, *, term_timeout: float = 5.0, kill_timeout: float = 5.0) -> list[str]:
        """SIGTERM every group (SIGCONT too, for a stopped one), SIGKILL what is left, and
        return a description of any process that survived both."""
        for proc in self.procs:
            proc.signal(signal.SIGTERM)
            proc.signal(signal.SIGCONT)
        deadline = time.monotonic() + term_timeout
        while time.monotonic() < deadline and any(p.members() for p in self.procs):
            time.sleep(0.05)
        for proc in self.procs:
            if proc.members():
                proc.signal(signal.SIGKILL)
        deadline = time.monotonic() + kill_timeout
        while time.monotonic() < deadline and any(p.members() for p in self.procs):
            time.sleep(0.05)
        for proc in self.procs:
            try:
                proc.popen.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        if self._app is not None:
            self._app.close()
        return [f"{p.name}: {p.members()}" for p in self.procs if p.members()]


def history(execution_id) -> list[tuple[str, str]]:
    """The execution's transitions as (from, to) pairs, oldest first."""
    return [(e.from_state, e.to_state) for e in events(execution_id)]


def events(execution_id) -> list:
    """The execution's history in the order it was written: rows by id, or told by its columns
    (executions/history.py; a derived event's id is None)."""
    from executions import history as execution_history
    from executions.models import Execution, ExecutionEvent

    execution = Execution.objects.filter(pk=execution_id).first()
    if execution is not None and execution.history_derived:
        return execution_history.derived(execution)
    return list(ExecutionEvent.objects.filter(execution_id=execution_id).order_by("id"))


def events_count() -> int:
    """How many events the histories of all executions hold, rows or told by their columns."""
    from executions import history as execution_history
    from executions.models import Execution

    return sum(map(len, execution_history.timelines(Execution.objects.all()).values()))


def execution_in(execution_id, *states: str):
    """The execution, if it is in one of `states` (for wait_for)."""
    from executions.models import Execution

    return Execution.objects.filter(pk=execution_id, state__in=states).first()
