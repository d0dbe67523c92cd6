"""The web role as it runs in production, in a subprocess, on pytest-django's test database: daphne
serving scheduler_project.asgi:application, or gunicorn serving scheduler_project.wsgi with the
README's configuration file."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(settings.BASE_DIR)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url(**overrides) -> str:
    db = {**connection.settings_dict, **overrides}
    auth = db["USER"] or "postgres"
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


# How the README starts each server (the bind address and port added).
SERVERS = {
    "daphne": lambda port: [
        *(sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)),
        "scheduler_project.asgi:application",
    ],
    "gunicorn": lambda port: [
        *(sys.executable, "-m", "gunicorn", "-c", "scheduler_project/gunicorn.conf.py"),
        *("-b", f"127.0.0.1:{port}", "-w", "1", "scheduler_project.wsgi"),
    ],
}


class WebServer:
    def __init__(self, tmp: Path, env: dict[str, str], kind: str = "daphne") -> None:
        self.port = free_port()
        self.kind = kind
        self.log_path = tmp / f"{kind}-{self.port}.log"
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "TICKWORK_VAR_DIR": str(tmp),
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "scheduler_project.settings",
            **env,
        }
        self.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        self.process: subprocess.Popen | None = None

    def start(self) -> "WebServer":
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                SERVERS[self.kind](self.port),
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.kind} did not listen within 60 s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def web_server(transactional_db, tmp_path):
    """web_server(**env, server="daphne") -> a running web server (daphne or gunicorn) with those
    environment variables; stopped after."""
    servers: list[WebServer] = []

    def start(server: str = "daphne", **env: str) -> WebServer:
        servers.append(WebServer(tmp_path, env, server).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
