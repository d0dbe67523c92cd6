"""The audit model moved from the dashboard app to this one without touching its table: the rows
written before the move are still there, and the table is still append-only, on both databases."""

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

ROOT = Path(__file__).resolve().parents[2]
OLD_ROW = (
    "INSERT INTO dashboard_auditentry (at, actor, action, target_type, target_id, target_label, outcome, detail,"
    " request_id) VALUES ('2026-11-20 10:00:00', 'ada', 'job.pause', 'job', 'j1', 'nightly', 'OK', '', %s)"
)


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_the_rows_and_the_trigger_survive_the_move():
    if connection.vendor != "postgresql":
        pytest.skip("the SQLite case runs the migrations in a process of its own (below)")
    executor = MigrationExecutor(connection)
    executor.migrate([("audit", None)])  # back to before the move: the dashboard's model and table
    with connection.cursor() as cursor:
        cursor.execute(OLD_ROW, [uuid.uuid4().hex])

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    from audit.models import AuditEntry

    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.actor_kind) == ("ada", "job.pause", None)
    with pytest.raises(Exception, match="append-only"):
        AuditEntry.objects.filter(pk=entry.pk).update(actor="someone else")


def test_on_sqlite_the_rows_and_the_trigger_survive_the_move(tmp_path):
    """A fresh embedded database at the dashboard's first migration, a row in it, then every
    migration since: the row is there with no kind, and UPDATE and DELETE are still refused."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    env["TICKWORK_VAR_DIR"] = str(tmp_path)

    def migrate(*args: str) -> None:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0", *args], cwd=ROOT, env=env, check=True)

    migrate("dashboard", "0001_initial")
    database = sqlite3.connect(tmp_path / "tickwork.sqlite3")
    database.execute(OLD_ROW.replace("%s", "?"), [uuid.uuid4().hex])
    database.commit()
    database.close()
    migrate()

    database = sqlite3.connect(tmp_path / "tickwork.sqlite3")
    assert database.execute("SELECT actor, action, actor_kind FROM dashboard_auditentry").fetchall() == [
        ("ada", "job.pause", None)
    ]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        database.execute("UPDATE dashboard_auditentry SET actor = 'someone else'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        database.execute("DELETE FROM dashboard_auditentry")
