"""The database's clock (executions/clock.py): what every role takes `now` from."""

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test.utils import CaptureQueriesContext

from executions import clock
from scheduler_project.tests.faketime import faketime_env

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("on SQLite the database's clock is this host's")


def _database_time() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def test_defect12_db_now_is_the_database_clock_without_a_statement_per_call(postgres, monkeypatch):
    """The first call measures the database's clock (READINGS statements, once); the calls after
    it read it off the monotonic clock, with no statement, until the measurement is
    REFRESH_SECONDS old."""
    monkeypatch.setattr(clock, "_anchor", None)
    with CaptureQueriesContext(connection) as first:
        before = clock.db_now()
    with CaptureQueriesContext(connection) as later:
        times = [clock.db_now() for _ in range(100)]
    after = _database_time()

    assert len(first) == clock.READINGS and len(later) == 0
    assert times == sorted(times)
    # Off by at most half the measuring round trip (more if this process was descheduled in it).
    assert abs(after - times[-1]) < timedelta(seconds=1)
    assert before.tzinfo is not None

    mono, at = clock._anchor
    monkeypatch.setattr(clock, "_anchor", (mono - clock.REFRESH_SECONDS, at))
    with CaptureQueriesContext(connection) as refreshed:
        clock.db_now()
    assert len(refreshed) == clock.READINGS


def test_the_reading_with_the_shortest_round_trip_is_kept(monkeypatch):
    """A first reading that waited 60 ms (opening the connection, say) would put the anchor 30 ms
    off; the reading whose round trip was shortest anchors the clock instead."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    answers = iter([base, base + timedelta(seconds=1.001), base + timedelta(seconds=2.005)])
    ticks = iter([10.0, 10.060, 11.0, 11.002, 12.0, 12.010])  # before and after each reading

    class Remote:
        remote_clock = True

        def measure_clock(self):
            return next(answers)

    monkeypatch.setattr(clock, "store", Remote)
    real = clock.time.monotonic
    monkeypatch.setattr(clock.time, "monotonic", lambda: next(ticks, None) or real())
    monkeypatch.setattr(clock, "_anchor", None)

    midpoint, database_time = clock.measure()
    assert midpoint == pytest.approx(11.001) and database_time == base + timedelta(seconds=1.001)


def test_defect12_db_now_in_a_process_whose_clock_is_25s_behind_is_the_database_clock(postgres):
    """Under libfaketime the process's own clock is 25 s behind; db_now() is not."""
    env = faketime_env("-25s")
    s = connection.settings_dict
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=f"postgres://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}",
    )
    code = (
        "import django, time; django.setup()\n"
        "from executions.clock import db_now\n"
        "print(time.time(), db_now().timestamp())\n"
    )
    before = _database_time()
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    after = _database_time()
    assert done.returncode == 0, done.stderr
    local, database = (datetime.fromtimestamp(float(v), UTC) for v in done.stdout.split())

    assert before - local > timedelta(seconds=20)  # the child's own clock was shifted
    # And db_now() was not: it fell while the child ran, as the database's clock read around it
    # says (however long a loaded machine took to start and end the child; CI took 2.4 s once).
    slack = timedelta(seconds=1)
    assert before - slack <= database <= after + slack, (before, database, after)
    assert "this host's clock is 25" in done.stderr and "behind the database's" in done.stderr


def test_db_now_on_sqlite_is_the_local_clock(monkeypatch):
    """SQLite is a file on this host: its clock is the local one, and nothing is asked."""
    monkeypatch.setattr(connections[DEFAULT_DB_ALIAS], "vendor", "sqlite")
    with CaptureQueriesContext(connection) as queries:
        before = datetime.now(UTC)
        now = clock.db_now()
    assert before <= now <= datetime.now(UTC) and not queries
