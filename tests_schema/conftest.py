"""The schema tests' fixtures: a tenant's token with seeded objects (tests_schema/seed.py), and the
web role started as production starts it (gunicorn), on this test's PostgreSQL database, with a
dispatcher and a sweeper beside it; tests that need work to run start a worker as well."""

import os
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest
import requests
from django.db import connection

from tenants.services import tenant_create, token_create
from testing.harness import Live, database_url
from tests_schema.seed import seed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def token(transactional_db) -> str:
    """A token of tenant acme, whose objects are seeded before any role starts."""
    if connection.vendor != "postgresql":
        pytest.skip("the schema tests run on PostgreSQL (DATABASE_URL)")
    _, raw = token_create(tenant=tenant_create(slug="acme"))
    seed(raw)
    return raw


@pytest.fixture
def role_settings() -> dict[str, str]:
    """Settings the roles get besides the database's: none here, so they run with production's
    defaults; a test module that needs others overrides this fixture."""
    return {}


@pytest.fixture
def roles(token, tmp_path, role_settings):
    """Roles against this test's database (testing/harness.py: each in its own process group, its
    log under tmp_path), all stopped at teardown. Their broker is the embedded one, a folder of
    this test's own (settings.py, under TICKWORK_VAR_DIR), shared by every role started here."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TICKWORK_", "DJANGO_", "DATABASE_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=database_url(),
        TICKWORK_VAR_DIR=str(tmp_path / "var"),
        # A connection per request, not one kept per server thread: the machine's PostgreSQL
        # is shared with the rest of the suite.
        DATABASE_CONN_MAX_AGE="0",
        PYTHONUNBUFFERED="1",
        **role_settings,
    )
    live = Live(tmp_dir=tmp_path, env=env, broker_url="filesystem://", var_dir=tmp_path / "var")
    yield live
    survivors = live.stop_all()
    connection.close()
    assert not survivors, f"processes survived SIGTERM and SIGKILL: {survivors}"


@pytest.fixture
def web(roles):
    """The web role's HTTP side on a free port, as production serves it (README, "Production
    deployment": gunicorn with its configuration file, here one process), with a dispatcher and
    a sweeper beside it (so /v1/health answers as a running install's does); its base URL."""
    port = _free_port()
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or "gunicorn"
    argv = [gunicorn, "-c", "scheduler_project/gunicorn.conf.py", "-b", f"127.0.0.1:{port}", "-w", "1"]
    server = roles.start("web", name="web", argv=[*argv, "scheduler_project.wsgi"])
    roles.dispatcher()
    roles.sweeper()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            # Health is 200 once the dispatcher has reported (degraded while no worker runs).
            if requests.get(f"{base}/v1/health", timeout=5).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        assert server.alive(), server.tail()
        assert time.monotonic() < deadline, f"the web role did not answer within 60 s\n{roles.tails()}"
        time.sleep(0.2)
    return base
