"""The database connections, from the environment (settings.py reads them through `databases`).

- `DATABASE_URL`: the store; the embedded default is a SQLite file under the var folder.
- `DATABASE_DIRECT_URL`: PostgreSQL itself, when `DATABASE_URL` goes through a pooler in
  transaction mode (PgBouncer). A pooler in that mode gives a client a server connection for one
  transaction at a time, so what needs a session of its own must bypass it: the dispatcher's LISTEN
  for due work and a worker's cancel relay (store/postgres/listeners.py) connect here. With it
  set, nothing else relies on a session: prepared statements are off unless asked for
  (PgBouncer 1.21 and later keep them with `max_prepared_statements`), Django's server-side cursors
  are off (its `WITH HOLD` cursors outlive a transaction), and no startup `options` are sent
  (PgBouncer refuses them unless told to ignore them), so `jit = off` is the database's own setting
  there: `ALTER DATABASE … SET jit = off` (README, "PgBouncer").
"""

import os
from pathlib import Path
from typing import Any

import dj_database_url


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def databases(var_dir: Path) -> dict[str, dict[str, Any]]:
    default: dict[str, Any] = dict(
        dj_database_url.config(
            default=f"sqlite:///{var_dir / 'tickwork.sqlite3'}",
            conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        )
    )
    if default["ENGINE"] == "django.db.backends.sqlite3":
        _sqlite(default)
    elif default["ENGINE"] == "django.db.backends.postgresql":
        _postgres(default, pooled=bool(os.environ.get("DATABASE_DIRECT_URL")))
    return {"default": default}


def direct() -> dict[str, Any]:
    """psycopg's connection parameters for `DATABASE_DIRECT_URL` (empty without it): what the
    listeners put in place of the store's host, port, database and user."""
    url = os.environ.get("DATABASE_DIRECT_URL")
    if not url:
        return {}
    parsed: dict[str, Any] = dict(dj_database_url.parse(url))
    names = {"NAME": "dbname", "USER": "user", "PASSWORD": "password", "HOST": "host", "PORT": "port"}
    return {param: parsed[key] for key, param in names.items() if parsed.get(key)}


def _sqlite(db: dict[str, Any]) -> None:
    # Several processes (web, dispatcher, sweeper, workers) share the file in standalone mode:
    # WAL lets readers run beside the writer, and the timeout queues writers instead of failing.
    db["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    db["CONN_MAX_AGE"] = 0
    if db["NAME"] != ":memory:":
        # Tests on SQLite use a file beside the database, test_<name>, as on PostgreSQL, not
        # Django's in-memory default: the end-to-end tests' roles are other processes.
        sqlite = Path(db["NAME"])
        db["TEST"] = {"NAME": str(sqlite.with_name(f"test_{sqlite.name}"))}


def _postgres(db: dict[str, Any], *, pooled: bool) -> None:
    options = db.setdefault("OPTIONS", {})
    if env_bool("DATABASE_PREPARED_STATEMENTS", not pooled):
        # The scheduler's hot statements (the claim, a worker's start and outcome) run as prepared
        # statements (store/postgres/store.py `_execute`): planned once per connection, not per
        # call. Django's own queries bind on the client and are never prepared, whatever this says.
        options["prepare_threshold"] = 5
    if pooled:
        db["DISABLE_SERVER_SIDE_CURSORS"] = True
    else:
        # No JIT compilation: every statement here is short (a page, a claim, a probe per row), and
        # where the planner's estimate of one runs high (a probe of each job's executions: a job
        # list filtered by state) compiling it cost 270 ms for a 4 ms query
        # (dashboard/tests/test_performance.py).
        options["options"] = f"{options.get('options', '')} -c jit=off".strip()
    # On PostgreSQL each process takes its connections from a pool of its own (psycopg_pool through
    # Django's OPTIONS["pool"]): a thread holds one only for a request or a unit of work and returns
    # it after, and a process never holds more than DATABASE_POOL_MAX_SIZE. Without it, an ASGI
    # server kept one connection per request thread for CONN_MAX_AGE, and a crowd of clients
    # exhausted max_connections. A process's threads fix what it uses at most (README, "Production
    # deployment"): the web role up to the pool's size, a dispatcher 2 (its LISTEN connection is its
    # own), a sweeper 1, a worker pool process 3 (its run, its heartbeats, its outcome recorder), a
    # worker's main process 2 (its cancel relay's LISTEN, its registration). DATABASE_POOL=false
    # goes back to a connection per thread kept for DATABASE_CONN_MAX_AGE.
    if not env_bool("DATABASE_POOL", True):
        return
    db["CONN_MAX_AGE"] = 0  # the pool keeps the connections
    timeout = float(os.environ.get("DATABASE_POOL_TIMEOUT", "10"))
    options["pool"] = {
        "min_size": int(os.environ.get("DATABASE_POOL_MIN_SIZE", "0")),
        # At least a worker process's three threads, which each hold one while a run lasts.
        "max_size": max(3, int(os.environ.get("DATABASE_POOL_MAX_SIZE", "6"))),
        # A request waits this long for a free connection, then answers 503 with Retry-After.
        "timeout": timeout,
        # While the database is unreachable the pool tries again at doubling intervals (1, 2, 4 …
        # s) for this long, then gives up until the next request for a connection starts again at
        # once. psycopg_pool's default, 5 min, let the intervals reach minutes: a role resumed 40 s
        # after a 60 s outage ended. Tied to the wait above, it resumes within it.
        "reconnect_timeout": timeout,
        # Connections opened for a burst are closed after this long unused.
        "max_idle": 60.0,
    }
