"""The replica's entry in DATABASES, made from the primary's (README, "Reads on a replica")."""

import copy
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

REPLICA_POOL = "tickwork-replica"
# How often a web process looks at the replica's lag (store/replica/health.py's CHECK_SECONDS, not
# imported: settings come before the apps): a client's window after a write must cover the lag
# allowed plus this, or a read could miss the write.
LAG_CHECK_SECONDS = 1.0


def replica_database(url: str, default: dict[str, Any], *, window: float, max_lag: float) -> dict[str, Any] | None:
    """DATABASES["replica"] for DATABASE_REPLICA_URL (None when it is unset): the primary's
    settings (its pool, prepared statements, jit=off) with the replica's address, a short wait for
    a connection, and pytest-django's test database mirrored, never created, on it."""
    if not url.strip():
        return None
    if default["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured(
            "DATABASE_REPLICA_URL needs DATABASE_URL on PostgreSQL: the embedded default has none"
        )
    if window < max_lag + LAG_CHECK_SECONDS:
        raise ImproperlyConfigured(
            f"TICKWORK_REPLICA_WINDOW_SECONDS ({window:g}) must be at least TICKWORK_REPLICA_MAX_LAG_SECONDS "
            f"({max_lag:g}) + {LAG_CHECK_SECONDS:g}: a client's reads after its write could miss it"
        )
    parsed = dj_database_url.parse(url)
    if parsed["ENGINE"] != default["ENGINE"]:
        raise ImproperlyConfigured("DATABASE_REPLICA_URL must be a postgres:// URL, a replica of DATABASE_URL")
    replica = copy.deepcopy(default)
    for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT"):
        if key in parsed:
            replica[key] = parsed[key]
    options = replica.setdefault("OPTIONS", {})
    options.update(parsed.get("OPTIONS", {}))  # e.g. ?sslmode=require
    # A replica that does not answer costs a read two seconds at most before it goes to the
    # primary (web/replica.py).
    options.setdefault("connect_timeout", 2)
    # So that the replica's pg_stat_activity tells the reads apart (README: how to check).
    options.setdefault("application_name", "tickwork reads")
    # Each connection is checked as it is taken (by the pool: psycopg_pool's check_connection):
    # after the replica restarts, old connections are dropped instead of failing a request each.
    replica["CONN_HEALTH_CHECKS"] = True
    if "pool" in options:
        # A second at most for a connection (the replica is busy, or down and not yet seen to be),
        # then the read goes to the primary; named, so that its reconnection warnings are left to
        # the one line the replica's health says (store/replica/health.py).
        options["pool"] = {**options["pool"], "timeout": 1.0, "reconnect_timeout": 1.0, "name": REPLICA_POOL}
    replica["TEST"] = {"MIRROR": "default"}
    return replica
