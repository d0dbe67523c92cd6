"""Reads on a replica with real processes (README, "Reads on a replica"): the test starts its own
primary and a streaming replica of it (testing/postgres_clusters.py), and the web role (daphne)
on both. With the replica's replay paused, what a page shows tells which database served it: a
change made on the primary since is in the primary's answer, not in the replica's."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection

from tenants.services import tenant_create, token_create
from testing import postgres_clusters
from testing.harness import wait_for

pytestmark = pytest.mark.e2e

ROOT = Path(settings.BASE_DIR)
DOWN = "replica: reads go to the primary"


def _dump_test_database_into(primary: postgres_clusters.Cluster) -> None:
    """The test database as it is now (its schema, and the rows this test committed) copied into
    the primary's database `tickwork`: quicker than migrating it afresh."""
    s = connection.settings_dict
    env = {**os.environ, "PGPASSWORD": s["PASSWORD"] or ""}
    source = ["-h", s["HOST"] or "127.0.0.1", "-p", str(s["PORT"] or 5432), "-U", s["USER"] or "postgres"]
    bindir = primary.bindir
    target = ["-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"]
    subprocess.run([bindir / "createdb", *target, "tickwork"], check=True)
    dump = subprocess.run(
        [bindir / "pg_dump", *source, "--no-owner", "--no-privileges", s["NAME"]],
        env=env, capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    subprocess.run(
        [bindir / "psql", "-q", "-v", "ON_ERROR_STOP=1", primary.url("tickwork")],
        input=dump.stdout, capture_output=True, check=True, timeout=60,
    )  # fmt: skip


def _daphne(tmp_path, primary, replica) -> tuple[subprocess.Popen, str, Path]:
    port = postgres_clusters.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKWORK_", "CELERY_", "DATABASE_"))}
    env.pop("REDIS_URL", None)
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=primary.url("tickwork"),
        DATABASE_REPLICA_URL=replica.url("tickwork"),
        # A lag bound the paused replay stays within for the test's length.
        TICKWORK_REPLICA_MAX_LAG_SECONDS="30",
        TICKWORK_REPLICA_WINDOW_SECONDS="31",
        TICKWORK_VAR_DIR=str(tmp_path / "var"),
        PYTHONUNBUFFERED="1",
    )
    if redis_url := os.environ.get("TICKWORK_TEST_REDIS"):
        shared = redis.Redis.from_url(redis_url)  # other tests' too: only the markers are dropped
        for key in shared.scan_iter("*replica-wrote:*"):
            shared.delete(key)  # an earlier run's marker for a tenant of the same id
        env["REDIS_URL"] = redis_url  # the write marker in Redis, as every web process would share it
    log = tmp_path / "daphne.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "scheduler_project.asgi:application"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(f"{base}/v1/health", timeout=2).status_code in (200, 503)
        except requests.ConnectionError:
            assert process.poll() is None, log.read_text()
            return False

    wait_for(up, timeout=60, interval=0.1, what="daphne to answer")
    return process, base, log


def _names(base, token) -> set[str]:
    response = requests.get(f"{base}/v1/jobs", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert response.status_code == 200, response.text
    return {job["name"] for job in response.json()["results"]}


def test_the_api_and_the_dashboard_read_the_replica_a_writer_its_own_writes_and_a_stopped_replica_is_no_error(
    transactional_db, tmp_path, make_job
):
    if connection.vendor != "postgresql":
        pytest.skip("a streaming replica is PostgreSQL's")
    if postgres_clusters.bin_dir() is None:
        pytest.skip("no PostgreSQL server binaries (initdb) on this machine")
    started = time.monotonic()
    acme, globex = tenant_create(slug="acme"), tenant_create(slug="globex")
    acme_token, globex_token = token_create(tenant=acme)[1], token_create(tenant=globex)[1]
    make_job(acme, name="acme-job")
    make_job(globex, name="globex-job")
    staff = get_user_model().objects.create_user(username="ops", password="x", is_staff=True, is_superuser=True)
    session = SessionStore()
    session.update({"_auth_user_id": str(staff.pk), "_auth_user_backend": settings.AUTHENTICATION_BACKENDS[-1]})
    session["_auth_user_hash"] = staff.get_session_auth_hash()
    session.create()  # a staff session made here: a login is a POST, a write that the window would follow

    def dashboard_jobs() -> str:
        response = requests.get(f"{base}/dashboard/jobs/", cookies={"sessionid": session.session_key}, timeout=10)
        assert response.status_code == 200, response.status_code
        return response.text

    with postgres_clusters.primary_and_replica() as (primary, replica):
        _dump_test_database_into(primary)
        postgres_clusters.start_replica(primary, replica)
        daphne, base, log = _daphne(tmp_path, primary, replica)
        try:
            with primary.connect("tickwork") as writer:
                writer.execute("UPDATE tenants_apitoken SET last_used_at = now()")  # no token touch from here on
                postgres_clusters.caught_up(primary, replica, "tickwork")
                with replica.connect("tickwork") as standby:
                    standby.execute("SELECT pg_wal_replay_pause()")
                    # Changed on the primary only, as a worker or another client would change them.
                    writer.execute("UPDATE jobs_job SET name = name || '-renamed'")

                    # The replica serves once the web process has looked at it (once a second).
                    wait_for(lambda: _names(base, globex_token) == {"globex-job"}, timeout=10, what="a replica read")
                    for _ in range(3):
                        assert _names(base, globex_token) == {"globex-job"}
                        assert _names(base, acme_token) == {"acme-job"}
                    page = dashboard_jobs()
                    assert "acme-job" in page and "acme-job-renamed" not in page
                    readers = standby.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tickwork reads'"
                    ).fetchone()
                    assert readers is not None and readers[0] >= 1  # the web role's pool on the replica

                    # A writer reads its own write at once, and everything else the primary has.
                    created = requests.post(
                        f"{base}/v1/jobs",
                        headers={"Authorization": f"Bearer {globex_token}"},
                        json={"name": "fresh", "type": "DELAYED", "delaySec": 3600,
                              "target": {"pool": "default", "handler": "noop"}},
                        timeout=10,
                    )  # fmt: skip
                    assert created.status_code == 201, created.text
                    assert _names(base, globex_token) == {"globex-job-renamed", "fresh"}
                    # Another tenant, which wrote nothing, still reads the paused replica.
                    assert _names(base, acme_token) == {"acme-job"}
                    standby.execute("SELECT pg_wal_replay_resume()")
            wait_for(lambda: _names(base, acme_token) == {"acme-job-renamed"}, timeout=10, what="replay to resume")
            assert requests.get(f"{base}/v1/health", timeout=10).json()["replica"] == "ok"

            # The replica stops mid-test: reads go to the primary, no error, one line in the log.
            before = len(log.read_text())
            replica.stop("immediate")
            for _ in range(10):
                assert _names(base, acme_token) == {"acme-job-renamed"}
                assert "acme-job-renamed" in dashboard_jobs()
                time.sleep(0.2)  # across several of the web process's looks at the replica
            said = [line for line in log.read_text()[before:].splitlines() if " WARNING " in line or " ERROR " in line]
            assert len(said) == 1 and DOWN in said[0], log.read_text()[-3000:]
            assert not re.search(r"Traceback| 500 |Internal Server Error", log.read_text()), log.read_text()[-3000:]
            # The health check says so (no dispatcher runs here: it answers 503 for that, not this).
            health = requests.get(f"{base}/v1/health", timeout=10).json()
            assert health["replica"].startswith("reads go to the primary: it does not answer"), health
        finally:
            os.killpg(daphne.pid, 15)
            daphne.wait(timeout=20)
    assert time.monotonic() - started < 60
