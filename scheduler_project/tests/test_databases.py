"""The database settings from the environment (scheduler_project/databases.py): PostgreSQL reached
directly, and through a pooler in transaction mode with DATABASE_DIRECT_URL for what needs a session."""

import pytest

from scheduler_project.databases import databases, direct

URL = "postgres://app:secret@db.internal:5432/tickwork"
POOLED = "postgres://app:secret@pgbouncer.internal:6432/tickwork"


@pytest.fixture
def env(monkeypatch):
    for name in ("DATABASE_URL", "DATABASE_DIRECT_URL", "DATABASE_PREPARED_STATEMENTS", "DATABASE_POOL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_direct_postgres_prepares_turns_jit_off_and_pools(env, tmp_path):
    env.setenv("DATABASE_URL", URL)
    db = databases(tmp_path)["default"]
    assert db["HOST"] == "db.internal"
    assert db["OPTIONS"]["prepare_threshold"] == 5
    assert "-c jit=off" in db["OPTIONS"]["options"]
    assert db["OPTIONS"]["pool"]["max_size"] >= 3
    assert not db.get("DISABLE_SERVER_SIDE_CURSORS")
    assert direct() == {}


def test_behind_a_transaction_pooler_nothing_relies_on_a_session(env, tmp_path):
    """No prepared statement (PgBouncer before 1.21 would send it to another server connection), no
    server-side cursor (Django's outlive a transaction), no startup `options` (PgBouncer refuses them)."""
    env.setenv("DATABASE_URL", POOLED)
    env.setenv("DATABASE_DIRECT_URL", URL)
    db = databases(tmp_path)["default"]
    assert db["HOST"] == "pgbouncer.internal"
    assert "prepare_threshold" not in db["OPTIONS"]
    assert "options" not in db["OPTIONS"]
    assert db["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert direct() == {"dbname": "tickwork", "user": "app", "password": "secret", "host": "db.internal", "port": 5432}


def test_a_pgbouncer_that_keeps_prepared_statements_may_have_them(env, tmp_path):
    env.setenv("DATABASE_URL", POOLED)
    env.setenv("DATABASE_DIRECT_URL", URL)
    env.setenv("DATABASE_PREPARED_STATEMENTS", "true")
    assert databases(tmp_path)["default"]["OPTIONS"]["prepare_threshold"] == 5


def test_the_embedded_default_is_a_sqlite_file_in_the_var_folder(env, tmp_path):
    db = databases(tmp_path)["default"]
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["NAME"] == str(tmp_path / "tickwork.sqlite3")
    assert db["TEST"]["NAME"] == str(tmp_path / "test_tickwork.sqlite3")
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
