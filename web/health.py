"""Liveness and readiness: can we reach the database and the broker right now, and are the
scheduler's roles there: a dispatcher (without one nothing due ever starts), a sweeper (without
one lost leases, timeouts and retention wait), an alerter while any alert rule is on (without one
nothing pages) and live workers per pool?"""

from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection

from pools import registry, roles
from pools.models import PoolPause, Role, Worker
from store.replica.health import replica_health
from store.replica.routing import REPLICA


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:
        return f"database unreachable: {exc.__class__.__name__}: {exc}"
    return None


def check_replica() -> str | None:
    """With DATABASE_REPLICA_URL: whether the dashboard's and the API's reads are on the replica
    now (looked at afresh), else why they go to the primary."""
    if REPLICA not in settings.DATABASES:
        return None
    health = replica_health()
    return None if health.check() else f"reads go to the primary: {health.reason}"


def check_broker() -> str | None:
    try:
        with current_app.connection_for_write() as conn:
            # No retries: a probe must answer within its own timeout, not kombu's retry interval.
            conn.ensure_connection(max_retries=0, timeout=1)
    except Exception as exc:
        return f"broker unreachable: {exc.__class__.__name__}: {exc}"
    return None


def _bound(kind: str) -> timedelta:
    seconds = {
        Role.Kind.DISPATCHER: settings.TICKWORK_HEALTH_DISPATCHER_SECONDS,
        Role.Kind.SWEEPER: settings.TICKWORK_HEALTH_SWEEPER_SECONDS,
        Role.Kind.ALERTER: settings.TICKWORK_HEALTH_ALERTER_SECONDS,
    }[Role.Kind(kind)]
    return timedelta(seconds=seconds)


def check_role(kind: str, now: datetime) -> tuple[str | None, dict[str, Any]]:
    """Whether a process of `kind` finished a unit of work within its bound, and what the
    registry says of its processes (the problem, or None; the details)."""
    bound = _bound(kind)
    found = roles.seen(kind, now=now, within=bound)
    processes = [
        {
            "host": row.hostname,
            "pid": row.pid,
            "startedAt": row.started_at,
            "lastSeenAt": row.last_seen_at,
            "ageSec": round((now - row.last_seen_at).total_seconds(), 1),
            "lastError": row.last_error or None,
            "lastErrorAt": row.last_error_at,
        }
        for row in found.processes
    ]
    details = {"boundSec": bound.total_seconds(), "processes": processes}
    if found.last_seen_at is None:
        return (
            f"no {kind} seen: none has finished a unit of work in the last {10 * bound.total_seconds():.0f}s",
            details,
        )
    age = (now - found.last_seen_at).total_seconds()
    if age > bound.total_seconds():
        newest = found.processes[0]
        why = f"; its last error: {newest.last_error}" if newest.last_error else ""
        return (
            f"no {kind} has finished a unit of work for {age:.0f}s (bound {bound.total_seconds():.0f}s){why}",
            details,
        )
    return None, details


def check_workers(now: datetime) -> tuple[str | None, dict[str, Any]]:
    """Live workers per pool (the worker registry's bound): none at all is a problem."""
    pools = registry.capacity(now)
    newest = Worker.objects.filter(registry.live(now)).order_by("-last_seen_at").values_list("last_seen_at", flat=True)
    details = {
        "live": Worker.objects.filter(registry.live(now)).count(),
        "lastSeenAt": newest.first(),
        "pools": {pool: {"workers": c.workers, "slots": c.slots, "busy": c.busy} for pool, c in sorted(pools.items())},
        # Paused by an operator: nothing of them is admitted. Said, not a problem: it is on purpose.
        "paused": sorted(PoolPause.objects.values_list("pool", flat=True)),
    }
    return (None if details["live"] else "no live worker: nothing admitted can start"), details
