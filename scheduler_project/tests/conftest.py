"""The web role as it runs in production: daphne serving scheduler_project.asgi:application, in a
subprocess, on pytest-django's test database."""

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


class WebServer:
    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.log_path = tmp / f"daphne-{self.port}.log"
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
        argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port)]
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [*argv, "scheduler_project.asgi:application"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"daphne did not listen within 60 s: {self.log()}")

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
    """web_server(**env) -> a running daphne with those environment variables; stopped after."""
    servers: list[WebServer] = []

    def start(**env: str) -> WebServer:
        servers.append(WebServer(tmp_path, env).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
