"""Liveness and readiness: can we reach the database and the broker right now?"""

from celery import current_app
from django.db import connection


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:
        return f"database unreachable: {exc.__class__.__name__}: {exc}"
    return None


def check_broker() -> str | None:
    try:
        with current_app.connection_for_write() as conn:
            # No retries: a probe must answer within its own timeout, not kombu's retry interval.
            conn.ensure_connection(max_retries=0, timeout=1)
    except Exception as exc:
        return f"broker unreachable: {exc.__class__.__name__}: {exc}"
    return None
