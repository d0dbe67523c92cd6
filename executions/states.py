"""The execution state machine: the states, the allowed moves, and the functions that write them.

PENDING             waits for `available_at`. Made by job creation, a cron fire, a retry or a
                    re-drive; the dispatcher's claim is the only way out except cancellation.
QUEUED              claimed by a dispatcher under a new lease token and published to its pool's
                    queue. A worker starts it; the sweeper re-publishes it if none does in time.
RUNNING             a worker holds the lease and heartbeats. The worker records the outcome;
                    the sweeper takes it away when the lease expires or the timeout passes.
SUCCEEDED           terminal: the handler returned.
FAILED              the handler raised. Transient: the retry policy moves it on at once to
                    PENDING (attempt + 1) or DEAD.
TIMED_OUT           ran past the job's timeout. Transient like FAILED.
FAILED_WORKER_LOST  the lease expired with no outcome (the worker died or froze). Transient.
CANCELLED           terminal: cancelled before it ran, or stopped while running.
DEAD                terminal: attempts exhausted. The dead-letter view lists these.

DEAD, CANCELLED and FAILED go back to PENDING only by an explicit re-drive ("retry").
Every write of `state` goes through `transition` or `transition_set`: each is one conditional
UPDATE guarded by the source state (and, for a worker's writes, the lease token), and each
records an ExecutionEvent in the same transaction. Zero rows updated is an answer, not success.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, models, transaction


class ExecutionState(models.TextChoices):
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    FAILED_WORKER_LOST = "FAILED_WORKER_LOST"
    CANCELLED = "CANCELLED"
    DEAD = "DEAD"


S = ExecutionState
TRANSITIONS: dict[ExecutionState, frozenset[ExecutionState]] = {
    S.PENDING: frozenset({S.QUEUED, S.CANCELLED}),
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.FAILED_WORKER_LOST, S.CANCELLED}),
    S.FAILED: frozenset({S.PENDING, S.DEAD}),
    S.TIMED_OUT: frozenset({S.PENDING, S.DEAD}),
    S.FAILED_WORKER_LOST: frozenset({S.PENDING, S.DEAD}),
    S.DEAD: frozenset({S.PENDING}),
    S.CANCELLED: frozenset({S.PENDING}),
    S.SUCCEEDED: frozenset(),
}
TERMINAL = frozenset({S.SUCCEEDED, S.CANCELLED, S.DEAD})
# Failure states that the retry policy resolves within the same transaction that entered them.
RETRYABLE = frozenset({S.FAILED, S.TIMED_OUT, S.FAILED_WORKER_LOST})
ACTIVE = frozenset({S.QUEUED, S.RUNNING})
REDRIVABLE = frozenset({S.DEAD, S.CANCELLED, S.FAILED})


class InvalidTransition(Exception):
    def __init__(self, source: str, target: str) -> None:
        super().__init__(f"an execution cannot go from {source} to {target}")


def check(source: ExecutionState, target: ExecutionState) -> None:
    if target not in TRANSITIONS[ExecutionState(source)]:
        raise InvalidTransition(source, target)


@dataclass(frozen=True)
class Moved:
    """A row that a set-based transition moved, as the UPDATE returned it."""

    id: Any
    job_id: Any
    tenant_id: int
    pool: str
    attempt: int
    lease_token: int
    worker_id: str
    priority: int
    origin: str
    scheduled_for: datetime


def transition(
    *,
    execution_id,
    source: ExecutionState,
    target: ExecutionState,
    now: datetime,
    lease_token: int | None = None,
    message: str = "",
    **changes: Any,
) -> bool:
    """Move one execution from `source` to `target` if it is still in `source` (and still under
    `lease_token`, when given). Returns whether it moved; the event is written only if it did."""
    from executions.models import Execution

    check(source, target)
    rows = Execution.objects.filter(pk=execution_id, state=source)
    if lease_token is not None:
        rows = rows.filter(lease_token=lease_token)
    with transaction.atomic():
        if rows.update(state=target, updated_at=now, **changes) != 1:
            return False
        current = Execution.objects.values("attempt", "worker_id", "job_id", "tenant_id").get(pk=execution_id)
        record_events(
            [(execution_id, current["attempt"], current["worker_id"])],
            source=source,
            target=target,
            now=now,
            message=message,
        )
        _after(target, [(execution_id, current["job_id"], current["tenant_id"], target)], now)
    return True


def transition_set(
    *,
    source: ExecutionState,
    target: ExecutionState,
    now: datetime,
    where: str,
    params: Sequence[Any],
    assignments: str = "",
    assignment_params: Sequence[Any] = (),
    message: str = "",
) -> list[Moved]:
    """Move every execution in `source` that matches `where` (SQL over the executions table) to
    `target` in one UPDATE … RETURNING, and record their events. `assignments` adds SQL SET
    clauses. Used by the claim and the sweeper, which must work in sets, not row by row."""
    check(source, target)
    sql = (
        "UPDATE executions_execution SET state = %s, updated_at = %s"
        + (f", {assignments}" if assignments else "")
        + f" WHERE state = %s AND ({where})"
        " RETURNING id, job_id, tenant_id, pool, attempt, lease_token, worker_id, priority, origin, scheduled_for"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [target.value, now, *assignment_params, source.value, *params])
        moved = [Moved(*row) for row in cursor.fetchall()]
        if moved:
            record_events(
                [(m.id, m.attempt, m.worker_id) for m in moved], source=source, target=target, now=now, message=message
            )
            _after(target, [(m.id, m.job_id, m.tenant_id, target) for m in moved], now)
    return moved


def record_events(
    rows: Sequence[tuple[Any, int, str]], *, source: str, target: str, now: datetime, message: str = ""
) -> None:
    """Append history rows. Also used for a new execution's first event (source '')."""
    from executions.models import ExecutionEvent

    ExecutionEvent.objects.bulk_create(
        [
            ExecutionEvent(
                execution_id=execution_id,
                at=now,
                from_state=source,
                to_state=target,
                attempt=attempt,
                worker_id=worker_id or "",
                message=message,
            )
            for execution_id, attempt, worker_id in rows
        ]
    )


def _after(target: ExecutionState, changes: list[tuple[Any, Any, int, str]], now: datetime) -> None:
    """What follows every transition, in its transaction: a one-off job whose last open
    execution ended is settled, and the live views hear of the change once it commits."""
    from executions import live
    from jobs.services import jobs_settle

    if target in TERMINAL:
        jobs_settle(job_ids=list({job_id for _, job_id, _, _ in changes}), now=now)
    transaction.on_commit(lambda: live.publish_state_changes(changes))
