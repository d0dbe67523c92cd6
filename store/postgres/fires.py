"""create_fires on PostgreSQL: a batch of cron fires in one statement, each made unless it exists."""

import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime

import psycopg
from django.db import IntegrityError, connection, transaction

from store.postgres import queries
from store.rows import Fire, as_uuid
from store.tables import PENDING


def create_fires(execute: Callable[..., list[tuple]], fires: Sequence[Fire], *, now: datetime) -> int:
    """Make `fires` with `execute` (the store's, its parameters in binary: their text form is
    written in Python, element by element). Returns how many were made."""
    if not fires:
        return 0
    # Their trace contexts are written only when tracing made some: else the column's default.
    traced = any(f.traceparent for f in fires)
    params = [
        [as_uuid(f.job_id) for f in fires],
        [f.tenant_id for f in fires],
        [f.pool for f in fires],
        [f.priority for f in fires],
        [f.scheduled_for for f in fires],
        *([[f.traceparent for f in fires]] if traced else []),
        "SCHEDULE",
        PENDING,
        now,
        now,
    ]
    try:
        # Inside a caller's transaction (the dispatcher's claim) a savepoint, so that a fire another
        # transaction is making meanwhile fails this statement alone; outside one the statement is
        # its own transaction.
        with contextlib.nullcontext() if not connection.in_atomic_block else transaction.atomic():
            rows = execute(queries.create_fires(traced=traced), params)
    except IntegrityError as error:
        if not _made_meanwhile(error):
            raise
        # Made again with ON CONFLICT DO NOTHING: that fire is skipped, as one made before is.
        rows = execute(queries.create_fires(traced=traced, racing=True), params)
    return int(rows[0][0])


def _made_meanwhile(error: IntegrityError) -> bool:
    """Whether `error` is a fire's second insertion refused by the one-per-fire index: a fire that
    passed the statement's probe (another transaction's, not committed then, or one given twice)."""
    cause = error.__cause__
    return isinstance(cause, psycopg.errors.UniqueViolation) and cause.diag.constraint_name == "execution_job_fire"
