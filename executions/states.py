"""The execution state machine: the states, the allowed moves, and the functions that write them.

PENDING             waits for `available_at`. Made by job creation, a cron fire, a retry or a
                    re-drive; the dispatcher's claim is the only way out except cancellation.
QUEUED              claimed by a dispatcher under a new lease token and published to its pool's
                    queue. A worker starts it; the sweeper re-publishes it if none does in time.
RUNNING             a worker holds the lease and heartbeats. The worker records the outcome;
                    the sweeper takes it away when the lease expires or the timeout passes. A
                    worker that is shutting down releases it back to PENDING ("released").
SUCCEEDED           terminal: the handler returned.
FAILED              the handler raised. Transient: the retry policy moves it on at once to
                    PENDING (attempt + 1) or DEAD.
TIMED_OUT           ran past the job's timeout. Transient like FAILED.
FAILED_WORKER_LOST  the lease expired with no outcome (the worker died or froze). Transient.
CANCELLED           terminal: cancelled before it ran, or stopped while running.
DEAD                terminal: attempts exhausted. The dead-letter view lists these.

DEAD, CANCELLED and FAILED go back to PENDING only by an explicit re-drive ("retry"). RUNNING goes
back to PENDING only by a release: its worker is shutting down and stopped the handler short, so
the same attempt is due again at once (not a failure: no attempt is spent, and nothing waits for
the lease to expire).
Every write of `state` goes through `transition`, `transition_set` or `start_run` (a worker's
QUEUED → RUNNING, which also reads what the handler needs): each is one conditional UPDATE
guarded by the source state (and, for a worker's writes, the lease token), and each records an
ExecutionEvent in the same transaction. Zero rows updated is an answer, not success. On
PostgreSQL each is a single prepared statement, event (and job settling) included. What a handler
produced (result, error, traceback, message) is made storable first (executions.storable), so a
character the database refuses cannot fail the statement that records an outcome.
"""

import contextlib
import functools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.models import Field

from executions import observers
from executions.storable import storable_json, storable_text


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
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.FAILED_WORKER_LOST, S.CANCELLED, S.PENDING}),
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
    where = {"id": execution_id, "state": source}
    if lease_token is not None:
        where["lease_token"] = lease_token
    message = storable_text(message)
    values = {"state": target, "updated_at": now, **_storable(changes)}
    postgres = connection.vendor == "postgresql"
    # On PostgreSQL the move, its event and (after a terminal state) the job's settling are one
    # statement, which is a transaction of its own: BEGIN and COMMIT would only add round trips,
    # and a worker's outcome is one round trip. Inside a caller's transaction a savepoint is
    # still taken, so a failure here rolls back to it, as before.
    with contextlib.nullcontext() if postgres and not connection.in_atomic_block else transaction.atomic():
        if postgres:
            update_sql, params = _update_sql(where, values)
            moved = _with_events(
                update_sql, params, source=source, target=target, now=now, message=message, settle=target in TERMINAL
            )
            if len(moved) != 1:
                return False
            job_id, tenant_id = moved[0][3:5]
        else:
            if Execution.objects.filter(**where).update(**values) != 1:
                return False
            current = Execution.objects.values("attempt", "worker_id", "job_id", "tenant_id").get(pk=execution_id)
            record_events(
                [(execution_id, current["attempt"], current["worker_id"])],
                source=source,
                target=target,
                now=now,
                message=message,
            )
            job_id, tenant_id = current["job_id"], current["tenant_id"]
        _after(target, [(execution_id, job_id, tenant_id, target)], now, settled=postgres)
    return True


def _storable(changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` with what a handler produced (its result, error and traceback) made storable:
    one unstorable character must not keep a run's outcome from being recorded."""
    for name, make in (("result", storable_json), ("error", storable_text), ("traceback", storable_text)):
        if name in changes and changes[name] is not None:
            changes[name] = make(changes[name])
    return changes


@dataclass(frozen=True)
class Started:
    """A run a worker has just started, with what its handler needs."""

    id: Any
    job_id: Any
    attempt: int
    handler: str
    payload: Any
    tenant_slug: str
    signing_secret: str


def start_run(*, execution_id, lease_token: int, now: datetime, worker_id: str, lease: timedelta) -> Started | None:
    """QUEUED → RUNNING for the worker that holds `lease_token`: its lease runs until now + lease
    and its timeout until now + the job's timeout. Returns the run, or None when the execution is
    not (any more) QUEUED under that token, and nothing was written.

    On PostgreSQL this is one statement that also records the event and reads the job and tenant
    the handler needs: a worker's start costs one round trip instead of five."""
    from executions.models import Execution
    from jobs.models import Job

    check(S.QUEUED, S.RUNNING)
    changes = {"started_at": now, "heartbeat_at": now, "worker_id": worker_id, "republish_at": None}
    if connection.vendor != "postgresql":
        row = (
            Execution.objects.select_related("job", "tenant")
            .filter(pk=execution_id, state=S.QUEUED, lease_token=lease_token)
            .first()
        )
        if row is None or not transition(
            execution_id=execution_id,
            source=S.QUEUED,
            target=S.RUNNING,
            now=now,
            lease_token=lease_token,
            message="started",
            lease_expires_at=now + lease,
            timeout_at=now + timedelta(seconds=row.job.timeout_sec),
            **changes,
        ):
            return None
        job, tenant = row.job, row.tenant
        return Started(row.pk, row.job_id, row.attempt, job.handler, job.payload, tenant.slug, tenant.signing_secret)
    update_sql, params = _update_sql(
        {"id": execution_id, "state": S.QUEUED, "lease_token": lease_token},
        {"state": S.RUNNING, "updated_at": now, "lease_expires_at": now + lease, **changes},
        extra_sets="timeout_at = %s + interval '1 second'"
        " * (SELECT timeout_sec FROM jobs_job WHERE jobs_job.id = executions_execution.job_id)",
        extra_params=[now],
    )
    # The handler's context comes from the job and the tenant, read by the same statement.
    context = (
        f"SELECT {', '.join('moved.' + c for c in _MOVED.split(', '))}, j.handler, j.payload, t.slug, t.signing_secret"
        " FROM moved JOIN jobs_job j ON j.id = moved.job_id JOIN tenants_tenant t ON t.id = moved.tenant_id"
    )
    with contextlib.nullcontext() if not connection.in_atomic_block else transaction.atomic():
        moved = _with_events(
            update_sql, params, source=S.QUEUED, target=S.RUNNING, now=now, message="started", select=context
        )
        if len(moved) != 1:
            return None
        execution_id, attempt, _, job_id, tenant_id, handler, payload, slug, secret = moved[0]
        _after(S.RUNNING, [(execution_id, job_id, tenant_id, S.RUNNING)], now, settled=True)
    payload = Job._meta.get_field("payload").from_db_value(payload, None, connection)
    return Started(execution_id, job_id, attempt, handler, payload, slug, secret)


@dataclass(frozen=True)
class Success:
    """A handler's return, to be recorded as SUCCEEDED under the lease it ran with."""

    execution_id: Any
    lease_token: int
    result: Any
    finished_at: datetime


def record_successes(successes: Sequence[Success], *, now: datetime) -> set:
    """RUNNING → SUCCEEDED for each run still under its lease token, all in one statement (and so
    one commit): the moves, their events (at each run's finish) and the settling of their jobs.
    Returns the ids recorded; a run whose lease moved on is left as it is. PostgreSQL only: a
    worker's outcome thread records what gathered while the last batch committed, and one commit
    for several outcomes is most of what an outcome costs the database."""
    from executions.models import Execution
    from executions.scheduling import jobs_settle_sql

    check(S.RUNNING, S.SUCCEEDED)
    if not successes:
        return set()
    result_field = Execution._meta.get_field("result")
    settle_sql, settle_params = jobs_settle_sql(moved="moved", now=now)
    rows = fetch(
        "WITH v AS (SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::jsonb[], %s::timestamptz[])"
        " AS v(id, lease_token, result, finished_at)),"
        " moved AS (UPDATE executions_execution e SET state = %s, updated_at = v.finished_at,"
        " finished_at = v.finished_at, result = v.result FROM v"
        " WHERE e.id = v.id AND e.state = %s AND e.lease_token = v.lease_token"
        f" RETURNING {', '.join('e.' + c for c in _MOVED.split(', '))}, v.finished_at),"
        " events AS (INSERT INTO executions_executionevent"
        " (execution_id, at, from_state, to_state, attempt, worker_id, message)"
        " SELECT id, finished_at, %s, %s, attempt, worker_id, 'succeeded' FROM moved),"
        f" settled AS ({settle_sql})"
        " SELECT id, job_id, tenant_id FROM moved",
        [
            [str(s.execution_id) for s in successes],
            [s.lease_token for s in successes],
            [result_field.get_db_prep_save(storable_json(s.result), connection) for s in successes],
            [s.finished_at for s in successes],
            S.SUCCEEDED.value,
            S.RUNNING.value,
            S.RUNNING.value,
            S.SUCCEEDED.value,
            *settle_params,
        ],
    )
    _after(S.SUCCEEDED, [(eid, job_id, tenant_id, S.SUCCEEDED) for eid, job_id, tenant_id in rows], now, settled=True)
    return {str(eid) for eid, _, _ in rows}


def _update_sql(
    where: dict[str, Any], values: dict[str, Any], *, extra_sets: str = "", extra_params: Sequence[Any] = ()
) -> tuple[str, list]:
    """UPDATE executions_execution SET `values` WHERE `where` (equalities), as `filter(**where)
    .update(**values)` would write it. Plain values go straight to SQL: the ORM's compiler was a
    third of a worker's CPU per run. An expression (F("attempt") + 1) takes the compiler's way."""
    from django.db.models.sql import UpdateQuery

    from executions.models import Execution

    if any(hasattr(value, "resolve_expression") for value in values.values()):
        assert not extra_sets
        query = Execution.objects.filter(**where).query.chain(UpdateQuery)
        query.add_update_values(values)
        return query.get_compiler(connection.alias).as_sql()
    sql, set_preps, where_preps = _update_shape(tuple(values), tuple(where), extra_sets)
    params = [prep(value) for prep, value in zip(set_preps, values.values(), strict=True)]
    params += extra_params
    params += [prep(value) for prep, value in zip(where_preps, where.values(), strict=True)]
    return sql, params


@functools.cache
def _update_shape(set_names: tuple[str, ...], where_names: tuple[str, ...], extra_sets: str) -> tuple[str, list, list]:
    """The SQL of an UPDATE that sets `set_names` where `where_names` are equal to parameters, and
    per parameter how to convert its value: a worker writes the same few shapes over and over, and
    building them (and looking up each field's conversion) was most of `_update_sql`'s time."""
    from executions.models import Execution

    meta, quote = Execution._meta, connection.ops.quote_name
    sets = [f"{quote(meta.get_field(name).column)} = %s" for name in set_names]
    if extra_sets:
        sets.append(extra_sets)
    conditions = [f"{quote(meta.get_field(name).column)} = %s" for name in where_names]
    sql = f"UPDATE {quote(meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    return sql, [_prep(name, save=True) for name in set_names], [_prep(name, save=False) for name in where_names]


def _prep(name: str, *, save: bool) -> Callable[[Any], Any]:
    """How a value of field `name` becomes a parameter: what the ORM would do, except where the
    driver takes the Python value as it is (strings, numbers, aware datetimes, None)."""
    from executions.models import Execution

    field = Execution._meta.get_field(name)
    kind = field.get_internal_type()
    if kind in ("CharField", "TextField", "IntegerField", "PositiveIntegerField", "BigIntegerField"):
        return _as_is
    if kind == "DateTimeField":
        return functools.partial(_datetime_prep, field)
    if save:
        return functools.partial(_save_prep, field)
    return functools.partial(_value_prep, field)


def _as_is(value: Any) -> Any:
    return value


def _datetime_prep(field, value: Any) -> Any:
    if value is None or value.tzinfo is not None:
        return value
    return _value_prep(field, value)  # naive: the ORM's warning and conversion


def _save_prep(field, value: Any) -> Any:
    return field.get_db_prep_save(value, connection=connections[DEFAULT_DB_ALIAS])


def _value_prep(field, value: Any) -> Any:
    return field.get_db_prep_value(value, connections[DEFAULT_DB_ALIAS])


_MOVED = "id, attempt, worker_id, job_id, tenant_id"
# The events of the rows an UPDATE … RETURNING id, attempt, worker_id named `moved` changed; its
# parameters are the time, the source, the target and the message.
_EVENTS_OF_MOVED = (
    "INSERT INTO executions_executionevent (execution_id, at, from_state, to_state, attempt, worker_id, message)"
    " SELECT id, %s, %s, %s, attempt, worker_id, %s FROM moved"
)


def _with_events(
    update_sql: str,
    params: list,
    *,
    source: str,
    target: str,
    now: datetime,
    message: str,
    settle: bool = False,
    select: str = f"SELECT {_MOVED} FROM moved",
) -> list[tuple]:
    """Run `update_sql` (an UPDATE of executions) with, in the same statement (a data-modifying
    CTE, PostgreSQL), an event for each row it moved and, with `settle`, the settling of their
    jobs. Returns what `select` reads from `moved`: by default (id, attempt, worker_id, job_id,
    tenant_id) per row moved. A worker makes two transitions per run: as three to five statements
    each, with BEGIN and COMMIT, they were most of a short run's time."""
    from executions.scheduling import jobs_settle_sql

    sql = f"WITH moved AS ({update_sql} RETURNING {_MOVED}), events AS ({_EVENTS_OF_MOVED})"
    params = [*params, now, str(source), str(target), message]
    if settle:
        settle_sql, settle_params = jobs_settle_sql(moved="moved", now=now)
        sql += f", settled AS ({settle_sql})"
        params += settle_params
    return fetch(f"{sql} {select}", params)


def fetch(sql: str, params: Sequence[Any], *, read_as: Sequence[Field | None] = ()) -> list[tuple]:
    """Run one statement and return its rows. On PostgreSQL, unless turned off in settings
    (DATABASE_PREPARED_STATEMENTS), as a prepared statement of the connection: Django binds
    parameters on the client, so PostgreSQL would plan each statement afresh, and for a worker's
    two statements per run planning took as long as running them. The connection's execute
    wrappers, error wrapping and transaction state apply as to any query; with query logging on
    (DEBUG), Django's own cursor runs it so that it is logged.

    `read_as` names the model field each leading column holds (None: a column left as it is);
    their values are converted as the ORM converts them. Raw SQL on SQLite gives times as naive
    UTC and ids as hex strings, and a naive time compared with an aware one raises."""
    db = connections[DEFAULT_DB_ALIAS]  # `connection` is a proxy: each attribute is a lookup
    rows = _fetch(db, sql, params)
    converters = []
    for index, field in enumerate(read_as):
        if field is not None:
            # The column as the ORM's compiler selects it (a foreign key as its target's type), and
            # what it applies to a value read: the backend's converters, then the field's.
            col = field.get_col(field.model._meta.db_table)
            functions = [*db.ops.get_db_converters(col), *col.get_db_converters(db)]
            if functions:
                converters.append((index, col, functions))
    if not converters:  # nothing to convert: PostgreSQL's driver gives times and ids as the ORM has them
        return rows
    converted = []
    for row in rows:
        row = list(row)
        for index, col, functions in converters:
            for convert in functions:
                row[index] = convert(row[index], col, db)
        converted.append(tuple(row))
    return converted


def _fetch(db, sql: str, params: Sequence[Any]) -> list[tuple]:
    db.ensure_connection()
    raw = db.connection
    if db.vendor != "postgresql" or raw.prepare_threshold is None or db.queries_logged:
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    import psycopg

    db.validate_no_broken_transaction()
    with db.wrap_database_errors, psycopg.Cursor(raw) as cursor:

        def execute(sql, params, many, context):
            return cursor.execute(sql, params, prepare=True)

        for wrapper in reversed(db.execute_wrappers):
            execute = functools.partial(wrapper, execute)
        execute(sql, params, False, {"connection": db, "cursor": cursor})
        return cursor.fetchall()


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
    from executions.models import Execution

    check(source, target)
    returning = "id, job_id, tenant_id, pool, attempt, lease_token, worker_id, priority, origin, scheduled_for"
    sql = (
        "UPDATE executions_execution SET state = %s, updated_at = %s"
        + (f", {assignments}" if assignments else "")
        + f" WHERE state = %s AND ({where})"
        f" RETURNING {returning}"
    )
    sql_params = [target.value, now, *assignment_params, source.value, *params]
    # On PostgreSQL the events are written by the same statement (a data-modifying CTE): the
    # moved rows never travel to Python and back, which for the dispatcher's batches of 1,000
    # was a third of the claim's time.
    in_statement = connection.vendor == "postgresql"
    if in_statement:
        sql = f"WITH moved AS ({sql}), events AS ({_EVENTS_OF_MOVED}) SELECT {returning} FROM moved"
        sql_params += [now, source.value, target.value, message]
    # No savepoint inside a caller's transaction (the dispatcher's, the sweeper's): one statement
    # needs none, and SAVEPOINT and RELEASE were two more round trips per claim.
    with transaction.atomic(savepoint=False):
        # Read as the ORM reads them: the dispatcher's cron arithmetic needs aware times.
        read_as = [Execution._meta.get_field(column) for column in returning.split(", ")]
        moved = [Moved(*row) for row in fetch(sql, sql_params, read_as=read_as)]
        if moved:
            if not in_statement:
                record_events(
                    [(m.id, m.attempt, m.worker_id) for m in moved],
                    source=source,
                    target=target,
                    now=now,
                    message=message,
                )
            _after(target, [(m.id, m.job_id, m.tenant_id, target) for m in moved], now)
    return moved


def as_uuid(value: Any) -> uuid.UUID:
    """An id as raw SQL returns it, as the ORM would: SQLite keeps UUIDs as 32 hex digits, and
    an id that compared unequal to the ORM's (a cron job looked up by it) was a job not found."""
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def record_events(
    rows: Sequence[tuple[Any, int, str]], *, source: str, target: str, now: datetime, message: str = ""
) -> None:
    """Append history rows. Also used for a new execution's first event (source '')."""
    from executions.models import ExecutionEvent

    message = storable_text(message)

    if connection.vendor == "postgresql" and rows:
        # One statement with three array parameters instead of a model instance and seven
        # parameters per row: for the dispatcher's batch of 1,000 this was half of the claim's time.
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO executions_executionevent"
                " (execution_id, at, from_state, to_state, attempt, worker_id, message)"
                " SELECT r.execution_id, %s, %s, %s, r.attempt, r.worker_id, %s"
                " FROM unnest(%s::uuid[], %s::integer[], %s::varchar[]) AS r(execution_id, attempt, worker_id)",
                [
                    now,
                    str(source),
                    str(target),
                    message,
                    [str(execution_id) for execution_id, _, _ in rows],
                    [attempt for _, attempt, _ in rows],
                    [worker_id or "" for _, _, worker_id in rows],
                ],
            )
        return
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


def _after(
    target: ExecutionState, changes: list[tuple[Any, Any, int, str]], now: datetime, *, settled: bool = False
) -> None:
    """What follows every transition, in its transaction: a one-off job whose last open
    execution ended is settled (unless the transition's statement `settled` it already), and
    the live views hear of the change once it commits."""
    from executions.scheduling import jobs_settle

    if target in TERMINAL and not settled:
        jobs_settle(job_ids=list({job_id for _, job_id, _, _ in changes}), now=now)
    observers.announce(changes)
