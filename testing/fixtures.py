"""Fixtures for the dispatch tests.

`live` runs real roles (Celery prefork workers, dispatchers, sweepers) as subprocesses against
the test database, on either of the two configurations Tickwork ships:
- PostgreSQL (DATABASE_URL) with a Redis broker database (TICKWORK_TEST_REDIS_DB, default 3,
  flushed at the start of each test);
- the embedded default: the SQLite test database (a file, see settings.py) with kombu's
  filesystem broker in a folder of the test's own.
Its timings are short so faults resolve in seconds; the test process gets the same settings, so
what it does in-process (a claim, a cancel) agrees with the roles.
"""

import os

import pytest
from django.db import connection
from django.utils import timezone

from testing import pgbouncer
from testing.harness import Live, database_url

# The roles' timings, shared by the test process (see `live_settings`).
LEASE_SECONDS = 3.0
CANCEL_GRACE_SECONDS = 1.0
PUBLISH_GRACE_SECONDS = 2.0
POLL_SECONDS = 0.2
SWEEP_SECONDS = 0.5
WORKER_BEAT_SECONDS = 0.5
WORKER_OFFLINE_SECONDS = 3.0


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def _redis_broker_url() -> str:
    base = os.environ.get("TICKWORK_TEST_REDIS_URL", "redis://127.0.0.1:6379").rstrip("/")
    return f"{base}/{int(os.environ.get('TICKWORK_TEST_REDIS_DB', '3'))}"


@pytest.fixture(autouse=True)
def _database_flushable(request):
    """Lets a transactional test's database be emptied after it (this fixture is set up after the
    database helper, so torn down before its flush).

    SQLite: the audit log is append-only (dashboard migration 0001's triggers refuse a DELETE)
    and Django empties SQLite tables with DELETE, where PostgreSQL's TRUNCATE passes by row
    triggers; so the log is emptied with its DELETE trigger set aside for that one statement.

    PostgreSQL: a test's own processes (a dispatcher, a worker) may still be running, and the
    flush's one TRUNCATE locks every table in an order of its own (Django lists them from a set),
    so it can close a cycle with a claim's transaction. PostgreSQL then ends whichever side's
    `deadlock_timeout` (1 s) runs out first, and if that is the flush, the test errs and leaves its
    rows to the next (CI saw it once). With the flush's timeout longer, the other side always
    finds the cycle first, and its role retries its unit of work."""
    marker = request.node.get_closest_marker("django_db")
    transactional = (marker is not None and marker.kwargs.get("transaction")) or {
        "transactional_db",
        "live_server",
        "live",
    } & set(request.fixturenames)
    if not transactional:
        yield
        return
    request.getfixturevalue("_django_db_helper")
    # The engine, not `connection.vendor`: a test may pose as SQLite on PostgreSQL by patching it.
    sqlite = connection.settings_dict["ENGINE"].endswith("sqlite3")
    yield
    if not sqlite:
        with connection.cursor() as cursor:
            cursor.execute("SET deadlock_timeout = '30s'")
        return
    import importlib

    no_delete = importlib.import_module("dashboard.migrations.0001_initial")._SQLITE_FORWARD[1]
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER IF EXISTS dashboard_auditentry_no_delete")
        cursor.execute("DELETE FROM dashboard_auditentry")
        cursor.execute(no_delete)


@pytest.fixture
def live_settings(settings):
    settings.TICKWORK_LEASE_SECONDS = LEASE_SECONDS
    settings.TICKWORK_CANCEL_GRACE_SECONDS = CANCEL_GRACE_SECONDS
    settings.TICKWORK_PUBLISH_GRACE_SECONDS = PUBLISH_GRACE_SECONDS
    settings.TICKWORK_POLL_SECONDS = POLL_SECONDS
    settings.TICKWORK_SWEEP_SECONDS = SWEEP_SECONDS
    settings.TICKWORK_WORKER_BEAT_SECONDS = WORKER_BEAT_SECONDS
    settings.TICKWORK_WORKER_OFFLINE_SECONDS = WORKER_OFFLINE_SECONDS
    return settings


@pytest.fixture(scope="session")
def pooler():
    """The test process's PgBouncer in transaction mode (testing/pgbouncer.py), which the roles on
    PostgreSQL connect through, as production's do (README, "PgBouncer"); None without one:
    TICKWORK_TEST_PGBOUNCER=0, or no `pgbouncer` on the machine outside CI (CI installs it)."""
    wanted = os.environ.get("TICKWORK_TEST_PGBOUNCER", "1") != "0"
    if not wanted or not (pgbouncer.available() or os.environ.get("CI")):
        yield None
        return
    bouncer = pgbouncer.PgBouncer().start()
    yield bouncer
    bouncer.stop()


@pytest.fixture
def live(request, transactional_db, live_settings, tmp_path):
    """Start roles with `live.worker()`, `live.dispatcher()`, `live.sweeper()`; all of them are
    stopped at teardown, and the test fails if any process of theirs survives.

    On PostgreSQL the roles connect through the test process's PgBouncer (`pooler`), and to
    PostgreSQL itself only for their LISTEN connections (DATABASE_DIRECT_URL)."""
    var_dir = tmp_path / "var"
    if connection.vendor == "postgresql":
        import redis

        broker_url = _redis_broker_url()
        try:
            redis.Redis.from_url(broker_url).flushdb()
        except redis.RedisError as exc:
            pytest.skip(f"end-to-end tests need Redis at {broker_url}: {exc}")
        with connection.cursor() as cursor:
            # For the roles' connections to this test database only. These tests are about
            # coordination, not about surviving an OS crash, and a WAL flush per commit is most of
            # a noop run's time on a small VM (the race test makes 20,000 worker commits).
            cursor.execute(
                f"ALTER DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])}"
                " SET synchronous_commit = off"
            )
    else:
        broker_url = "filesystem://"  # in TICKWORK_VAR_DIR, as settings.py places it: this test's own
    env = {
        key: value
        for key, value in os.environ.items()
        # The roles get exactly the configuration below, not the developer's.
        if not key.startswith(("TICKWORK_", "CELERY_", "DJANGO_", "DATABASE_")) and key != "REDIS_URL"
    }
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=database_url(),
        CELERY_BROKER_URL=broker_url,
        TICKWORK_VAR_DIR=str(var_dir),
        TICKWORK_LEASE_SECONDS=str(LEASE_SECONDS),
        TICKWORK_CANCEL_GRACE_SECONDS=str(CANCEL_GRACE_SECONDS),
        TICKWORK_PUBLISH_GRACE_SECONDS=str(PUBLISH_GRACE_SECONDS),
        TICKWORK_POLL_SECONDS=str(POLL_SECONDS),
        TICKWORK_SWEEP_SECONDS=str(SWEEP_SECONDS),
        TICKWORK_WORKER_BEAT_SECONDS=str(WORKER_BEAT_SECONDS),
        TICKWORK_WORKER_OFFLINE_SECONDS=str(WORKER_OFFLINE_SECONDS),
        TICKWORK_LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
        # Django's system checks, which a Celery worker runs as it starts (0.3 s of CPU a start,
        # some 200 starts a CI run), are `make lint`'s: `manage.py check`.
        CELERY_SKIP_CHECKS="1",
    )
    env.update(_through_pooler(request))
    harness = Live(tmp_dir=tmp_path, env=env, broker_url=broker_url, var_dir=var_dir)
    yield harness
    # A Celery worker on the filesystem broker takes about 6 s to stop warm (its blocking loop
    # waits 2 s for messages, and the pool's threads poll each second): the test is over, so
    # SIGKILL follows sooner there.
    survivors = harness.stop_all(term_timeout=1.0 if broker_url.startswith("filesystem") else 5.0)
    reports = [getattr(request.node, f"report_{when}", None) for when in ("setup", "call")]
    if survivors or any(report is not None and report.failed for report in reports):
        print(harness.tails())
    connection.close()
    assert not survivors, f"processes survived SIGTERM and SIGKILL: {survivors}"


def _through_pooler(request) -> dict[str, str]:
    if connection.vendor != "postgresql" or (bouncer := request.getfixturevalue("pooler")) is None:
        return {}
    direct = database_url()
    return {"DATABASE_URL": bouncer.url(direct), "DATABASE_DIRECT_URL": direct}


@pytest.fixture
def now():
    return timezone.now()
