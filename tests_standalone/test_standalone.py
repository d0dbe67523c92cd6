"""`manage.py run_standalone`, started as a newcomer would: a subprocess, a free port, the
README's own curl example, Ctrl-C at the end, and no process left behind."""

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _processes_with_marker(marker: str) -> list[int]:
    """Every live process whose environment carries the marker: the supervisor's descendants."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if marker.encode() in environ and "State:\tZ" not in status:
            found.append(int(entry.name))
    return found


def _readme_first_job_command(port: int) -> str:
    """The curl example from the README's first screen, pointed at this test's port."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- first-job -->\s*```(?:bash|sh)?\n(.*?)```", readme, re.S)
    assert block, "README.md must keep its first-job curl example between <!-- first-job --> markers"
    return block.group(1).replace("127.0.0.1:8000", f"127.0.0.1:{port}")


class Standalone:
    def __init__(self, tmp_path: Path, extra_env: dict[str, str]) -> None:
        self.port = _free_port()
        self.marker = f"tickwork-test-{uuid.uuid4()}"
        self.out_path = tmp_path / "standalone.out"
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"}
        }
        env.update(
            TICKWORK_VAR_DIR=str(tmp_path / "var"), TICKWORK_TEST_MARKER=self.marker, PYTHONUNBUFFERED="1", **extra_env
        )
        self.env = env
        self.out = open(self.out_path, "wb")
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "run_standalone", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group of its own, as under systemd or a shell's job
        )

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/health", timeout=2) as response:
                    if (
                        response.status == 200
                        and "standalone@" in self.logs("worker")
                        and " ready." in self.logs("worker")
                    ):
                        return time.monotonic() - self.started
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"not ready within {timeout}s:\n{self.output()}")

    def logs(self, role: str) -> str:
        path = Path(self.env["TICKWORK_VAR_DIR"]) / "logs" / f"{role}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    @property
    def token(self) -> str:
        return re.search(r"demo token\s+(\S+)", self.output()).group(1)

    def api(self, path: str, method: str = "GET", body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def executions(self, job_id: str) -> list[dict]:
        return self.api(f"/v1/jobs/{job_id}/executions")["results"]

    def wait_for(self, predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.3)
        raise AssertionError(
            f"timed out waiting for {what}\n{self.output()}\n--- worker log ---\n{self.logs('worker')[-3000:]}"
        )

    def interrupt(self, timeout: float = 30) -> int:
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout)
        self.out.close()
        return code

    def kill_everything(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid in _processes_with_marker(self.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def standalone_factory(tmp_path):
    started: list[Standalone] = []

    def start(**extra_env: str) -> Standalone:
        instance = Standalone(tmp_path, extra_env)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.kill_everything()


def _first_job_end_to_end(app: Standalone) -> None:
    ready_after = app.wait_ready()
    assert ready_after < 60, f"took {ready_after:.1f}s to come up"
    created = subprocess.run(
        ["bash", "-c", _readme_first_job_command(app.port)],
        env={**os.environ, "TOKEN": app.token},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    job = json.loads(created.stdout)
    assert job["state"] == "ACTIVE", created.stdout
    runs = app.wait_for(
        lambda: [e for e in app.executions(job["jobId"]) if e["state"] == "SUCCEEDED"], 30, "the job to succeed"
    )
    assert len(runs) == 1 and runs[0]["result"] == job["payload"]
    assert app.api(f"/v1/jobs/{job['jobId']}")["state"] == "COMPLETED"

    assert app.interrupt() == 0, app.output()
    assert "all roles stopped" in app.output()
    time.sleep(0.5)
    assert _processes_with_marker(app.marker) == [], "a child survived Ctrl-C"


def test_fresh_start_on_embedded_default_runs_readme_job_and_stops_clean(standalone_factory):
    """With nothing configured: SQLite + filesystem broker, up within a minute, the README's curl
    job ends SUCCEEDED, and Ctrl-C leaves no process behind."""
    app = standalone_factory()
    _first_job_end_to_end(app)
    assert "sqlite3 + broker filesystem" in app.output()
    assert "admin login admin / " in app.output()


@pytest.fixture
def postgres_and_redis():
    name = f"tickwork_sa_{uuid.uuid4().hex[:8]}"
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"CREATE DATABASE {name}"], check=True)
    redis_url = f"redis://127.0.0.1:6379/{os.environ.get('TICKWORK_TEST_STANDALONE_REDIS_DB', '9')}"
    yield {
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}",
        "CELERY_BROKER_URL": redis_url,
        "REDIS_URL": redis_url,
    }
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
        check=True,
    )


def test_same_roles_on_postgres_and_redis(standalone_factory, postgres_and_redis):
    """With DATABASE_URL, CELERY_BROKER_URL and REDIS_URL set, the same command runs the same
    roles on PostgreSQL and Redis."""
    import redis

    redis.Redis.from_url(postgres_and_redis["CELERY_BROKER_URL"]).flushdb()
    app = standalone_factory(**postgres_and_redis)
    _first_job_end_to_end(app)
    assert "postgresql + broker redis" in app.output()


def test_killed_worker_child_is_restarted_and_job_succeeds_once(standalone_factory):
    """SIGKILL on the worker child while a job runs: the supervisor logs and restarts it, the
    sweeper reclaims the lease, and the job ends SUCCEEDED exactly once."""
    app = standalone_factory(TICKWORK_LEASE_SECONDS="3", TICKWORK_SWEEP_SECONDS="0.5")
    app.wait_ready()
    job = app.api(
        "/v1/jobs",
        "POST",
        {"name": "slow", "type": "DELAYED", "delaySec": 0, "target": {"handler": "sleep"}, "payload": {"seconds": 4}},
    )
    app.wait_for(lambda: any(e["state"] == "RUNNING" for e in app.executions(job["jobId"])), 30, "RUNNING")
    worker_pid = int(re.findall(r"started worker \(pid (\d+)\)", app.output())[-1])
    os.kill(worker_pid, signal.SIGKILL)

    app.wait_for(lambda: "worker exited with -9; restarting" in app.output(), 15, "the restart to be logged")
    app.wait_for(
        lambda: re.findall(r"started worker \(pid (\d+)\)", app.output())[-1] != str(worker_pid), 15, "a new worker"
    )
    done = app.wait_for(
        lambda: [e for e in app.executions(job["jobId"]) if e["state"] == "SUCCEEDED"], 60, "the job to succeed"
    )
    executions = app.executions(job["jobId"])
    assert len(executions) == 1 and len(done) == 1
    detail = app.api(f"/v1/executions/{done[0]['executionId']}")
    transitions = [(event["from"], event["to"]) for event in detail["events"]]
    assert transitions.count(("QUEUED", "RUNNING")) == 2, transitions
    assert ("RUNNING", "FAILED_WORKER_LOST") in transitions
    assert transitions.count(("RUNNING", "SUCCEEDED")) == 1
    assert app.interrupt() == 0
    time.sleep(0.5)
    assert _processes_with_marker(app.marker) == []


def test_defect8_sigterm_to_the_process_group_stops_within_10s_and_releases_the_run(standalone_factory):
    """SIGTERM to the standalone process group (what systemd and Kubernetes send) while a `sleep`
    job runs: every process is gone within 10 s (no role force-killed), and the run is PENDING
    again at once, released by its worker (same attempt), not left RUNNING for its lease to expire."""
    app = standalone_factory()
    app.wait_ready()
    job = app.api(
        "/v1/jobs",
        "POST",
        {"name": "long", "type": "DELAYED", "delaySec": 0, "target": {"handler": "sleep"}, "payload": {"seconds": 120}},
    )
    app.wait_for(lambda: any(e["state"] == "RUNNING" for e in app.executions(job["jobId"])), 30, "RUNNING")

    sent = time.monotonic()
    os.killpg(app.process.pid, signal.SIGTERM)
    try:
        code = app.process.wait(10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the supervisor outlived SIGTERM by 10 s:\n{app.output()}\nworker:\n{app.logs('worker')[-3000:]}")
    while _processes_with_marker(app.marker) and time.monotonic() - sent < 10:
        time.sleep(0.1)
    stopped_after = time.monotonic() - sent

    assert _processes_with_marker(app.marker) == [], "a process outlived SIGTERM by 10 s"
    assert stopped_after < 10 and code == 0, app.output()
    with sqlite3.connect(Path(app.env["TICKWORK_VAR_DIR"]) / "tickwork.sqlite3") as db:
        state, attempt, execution_id = db.execute("SELECT state, attempt, id FROM executions_execution").fetchone()
        moves = db.execute(
            "SELECT from_state, to_state, message FROM executions_executionevent WHERE execution_id = ? ORDER BY id",
            [execution_id],
        ).fetchall()
    assert (state, attempt) == ("PENDING", 1), moves
    assert moves[-1] == ("RUNNING", "PENDING", "released: worker shutting down")
