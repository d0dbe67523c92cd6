"""The claim: the one query that takes due work. Everything else in dispatch builds on it."""

from datetime import datetime, timedelta
from typing import NamedTuple

from django.db import connection

from executions.models import Execution
from executions.states import ExecutionState, Moved, as_uuid, fetch, transition_set

# Why it is shaped so:
# - `state = 'PENDING' AND available_at <= now` is served by a partial index on the PENDING rows
#   only, so the cost follows what is due, not the size of history or of the future backlog.
# - Priority first, then due time. One LATERAL probe per priority level walks the partial index
#   (priority, available_at) in order and stops as soon as the batch is full: no sort of the
#   whole backlog, and a LOW row is looked at only when no HIGH or NORMAL one is due. The VALUES
#   list is read in order by the nested loop above the probes.
# - FOR UPDATE SKIP LOCKED: concurrent dispatchers take disjoint batches instead of queueing on
#   each other's row locks; correctness never depends on there being one dispatcher.
# - `now` is a parameter, not now()/clock_timestamp(): the planner can use the index bound,
#   and tests control time. The dispatcher passes the database's clock all the same
#   (executions/clock.py), so a dispatcher host with a fast clock fires nothing early.
# - The job must be ACTIVE: a paused job's pending execution waits where it is. The same probe of
#   the job says whether it is a cron job (the dispatcher then materialises its next fire), so
#   that takes no statement of its own.
# - Two statements: the SELECT takes and locks the batch, then the UPDATE moves those rows by
#   primary key (and writes their events). When nothing is due, which is most polls of an idle
#   dispatcher, only the SELECT runs: a few index probes, no UPDATE to start up.
_DUE_POSTGRES = """
    SELECT due.id, due.cron
    FROM (VALUES (0), (1), (2)) AS level(priority)
    CROSS JOIN LATERAL (
        SELECT e.id, j.type = 'CRON' AS cron
        FROM executions_execution e
        JOIN jobs_job j ON j.id = e.job_id AND j.state = 'ACTIVE'
        WHERE e.state = 'PENDING' AND e.priority = level.priority AND e.available_at <= %s
        ORDER BY e.available_at
        LIMIT %s
        FOR UPDATE OF e SKIP LOCKED
    ) AS due
    LIMIT %s
"""
# SQLite has one writer at a time and no row locks, so the plain ordered query is all it needs.
_DUE_SQLITE = """
    SELECT e.id, j.type = 'CRON' FROM executions_execution e
    JOIN jobs_job j ON j.id = e.job_id AND j.state = 'ACTIVE'
    WHERE e.state = 'PENDING' AND e.available_at <= %s
    ORDER BY e.priority, e.available_at
    LIMIT %s
"""


class Claimed(NamedTuple):
    executions: list[Moved]
    cron_job_ids: set  # the cron jobs among theirs


def claim_due(*, now: datetime, limit: int, publish_grace: timedelta) -> Claimed:
    """PENDING → QUEUED for up to `limit` due executions, each under a new lease token.
    Call inside the transaction that publishes after commit (it holds the batch's row locks)."""
    postgres = connection.vendor == "postgresql"
    due = fetch(_DUE_POSTGRES, [now, limit, limit]) if postgres else fetch(_DUE_SQLITE, [now, limit])
    if not due:
        return Claimed([], set())
    ids = [row[0] for row in due]
    where, params = ("id = ANY(%s)", [ids]) if postgres else (f"id IN ({', '.join(['%s'] * len(ids))})", ids)
    moved = transition_set(
        source=ExecutionState.PENDING,
        target=ExecutionState.QUEUED,
        now=now,
        where=where,
        params=params,
        assignments="lease_token = lease_token + 1, queued_at = %s, republish_at = %s, publish_count = 1",
        assignment_params=[now, now + publish_grace],
    )
    cron = {as_uuid(execution_id) for execution_id, is_cron in due if is_cron}
    return Claimed(moved, {m.job_id for m in moved if m.id in cron})


def next_due_at(*, after: datetime) -> datetime | None:
    """The earliest available_at later than `after` of a claimable execution: the dispatcher
    sleeps until then. What is due by `after` (the time of its last claim) it has claimed, another
    dispatcher holds, or was committed since, and its notification is on the way; a peek that
    counted those would find one at every look under a stream of creates."""
    rows = fetch(
        """
        SELECT e.available_at FROM executions_execution e
        WHERE e.state = 'PENDING' AND e.available_at > %s
          AND EXISTS (SELECT 1 FROM jobs_job j WHERE j.id = e.job_id AND j.state = 'ACTIVE')
        ORDER BY e.available_at
        LIMIT 1
        """,
        [after],
        # Aware, as the ORM reads it: SQLite gives the column as naive UTC, which the dispatcher's
        # clock cannot compare with its own time.
        read_as=[Execution._meta.get_field("available_at")],
    )
    return rows[0][0] if rows else None
