"""The store on PostgreSQL: the same statements as `Store`, in the shapes PostgreSQL runs fastest.

- A move, its event and (after a terminal state) the settling of its job are one statement, a
  data-modifying CTE, which is a transaction of its own: BEGIN and COMMIT would only add round
  trips, and a worker's outcome is one round trip.
- Statements run prepared (unless DATABASE_PREPARED_STATEMENTS is off): Django binds parameters
  on the client, so PostgreSQL would plan each statement afresh, and for a worker's two
  statements per run planning took as long as running them.
- The sweeper's batches are taken with FOR UPDATE SKIP LOCKED, so any number of sweepers work
  side by side on disjoint rows.
- NOTIFY wakes dispatchers, transactionally: delivered only if and when the creating transaction
  commits, so a dispatcher never wakes for a row it cannot see. A cancel request reaches the
  worker running it the same way.
"""

import contextlib
import functools
import logging
import operator
import select
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, NamedTuple

import psycopg
from django.db import connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DateField, DateTimeField, Field, JSONField, Model, TimeField

from jobs.models import ONE_OFF_TYPES, Job
from jobs.states import JobState
from store.admission import PostgresAdmissionStatements
from store.base import (
    MOVED_COLUMNS,
    CancelListener,
    Change,
    DueListener,
    Fire,
    Moved,
    Started,
    Store,
    Success,
    as_uuid,
)
from store.base import update_sql as _update_sql
from store.tables import FINISHED, PENDING, QUEUED, RUNNING, SUCCEEDED, execution_field

CHANNEL = "tickwork_due"
# How far ahead a wake-up is sent for (notify_due): above any dispatcher's TICKWORK_POLL_SECONDS.
WAKE_HORIZON = timedelta(minutes=1)
# Its payload: the worker id ("host:pid") of a run asked to cancel.
CANCEL_CHANNEL = "tickwork_cancel"
logger = logging.getLogger(__name__)

# What a single-row move reads back from its CTE `moved`.
_MOVED_ONE = "id, attempt, worker_id, job_id, tenant_id, run_id, step, event_id"
# What a start reads back besides: its pool and trace context, for the run's span.
_STARTED = f"{_MOVED_ONE}, pool, traceparent"
# The events of the rows an UPDATE … RETURNING id, attempt, worker_id named `moved` changed; its
# parameters are the time, the source, the target and the message.
_EVENTS_OF_MOVED = (
    "INSERT INTO executions_executionevent (execution_id, at, from_state, to_state, attempt, worker_id, message)"
    " SELECT id, %s, %s, %s, attempt, worker_id, %s FROM moved"
)
# "Not finished" rather than "in an open state": a condition the state index cannot serve, so
# the probe walks the job's few executions instead of a bitmap of every pending one (3.5 ms per
# outcome at 40,000 pending, seen in EXPLAIN ANALYZE). Literals: the states are our own constants.
_FINISHED_STATES_SQL = ", ".join(f"'{state}'" for state in sorted(FINISHED))


class PostgresStore(Store, PostgresAdmissionStatements):
    batches_outcomes: ClassVar[bool] = True
    remote_clock: ClassVar[bool] = True
    skip_locked: ClassVar[str] = " FOR UPDATE SKIP LOCKED"
    due_notifications: ClassVar[bool] = True
    # date_part, not EXTRACT: EXTRACT gives numeric (PostgreSQL 14 on), slow over a week's minutes.
    sample_bucket: ClassVar[str] = "CAST(floor(date_part('epoch', s.at - %s) / %s) AS INTEGER)"

    def move(
        self,
        *,
        execution_id: Any,
        source: str,
        target: str,
        now: datetime,
        values: dict[str, Any],
        lease_token: int | None = None,
        message: str = "",
    ) -> Change | None:
        where: dict[str, Any] = {"id": execution_id, "state": source}
        if lease_token is not None:
            where["lease_token"] = lease_token
        sql, params = _update_sql(self.db, where, {"state": target, "updated_at": now, **values})
        # Inside a caller's transaction a savepoint is still taken, so a failure here rolls back
        # to it; outside one the statement is its own transaction.
        with contextlib.nullcontext() if not connection.in_atomic_block else transaction.atomic():
            moved = self._with_events(
                sql, params, source=source, target=target, now=now, message=message, settle=target in FINISHED
            )
        if len(moved) != 1:
            return None
        execution_id, _, _, job_id, tenant_id = moved[0][:5]
        return (execution_id, job_id, tenant_id, target)

    def start(
        self, *, execution_id: Any, lease_token: int, now: datetime, values: dict[str, Any], lease: timedelta
    ) -> tuple[Started, Change] | None:
        # One statement that also records the event and reads the job and tenant the handler
        # needs: a worker's start costs one round trip instead of five.
        sql, params = _update_sql(
            self.db,
            {"id": execution_id, "state": QUEUED, "lease_token": lease_token},
            {"state": RUNNING, "updated_at": now, "lease_expires_at": now + lease, **values},
            # A workflow step's own timeout, if it has one (jobs/workflow.py), else its job's.
            extra_sets="timeout_at = %s + interval '1 second' * COALESCE("
            "(SELECT (s->>'timeoutSec')::int FROM executions_run r, jsonb_array_elements(r.steps) s"
            " WHERE r.id = executions_execution.run_id AND s->>'name' = executions_execution.step),"
            " (SELECT timeout_sec FROM jobs_job WHERE jobs_job.id = executions_execution.job_id))",
            extra_params=[now],
        )
        context = (
            f"SELECT {', '.join('moved.' + c for c in _STARTED.split(', '))},"
            " j.handler, j.payload, t.slug, t.signing_secret"
            " FROM moved JOIN jobs_job j ON j.id = moved.job_id JOIN tenants_tenant t ON t.id = moved.tenant_id"
        )
        with contextlib.nullcontext() if not connection.in_atomic_block else transaction.atomic():
            moved = self._with_events(
                sql,
                params,
                source=QUEUED,
                target=RUNNING,
                now=now,
                message="started",
                returning=_STARTED,
                select=context,
            )
        if len(moved) != 1:
            return None
        execution_id, attempt, _, job_id, tenant_id, run_id, step, event_id, pool, trace, *rest = moved[0]
        handler, payload, slug, secret = rest
        # As the ORM converts a read column (no expression: the stubs insist on one).
        payload = Job._meta.get_field("payload").from_db_value(payload, None, self.db)  # type: ignore[arg-type]
        started = Started(
            execution_id, job_id, attempt, handler, payload, slug, secret, run_id, step, event_id, pool, trace
        )
        return started, (execution_id, job_id, tenant_id, RUNNING)

    def succeed_many(self, successes: Sequence[Success], *, now: datetime, result_of: Callable) -> list[Change]:
        # All in one statement (and so one commit): the moves, their events (at each run's finish)
        # and the settling of their jobs. One commit for several outcomes is most of what an
        # outcome costs the database.
        result_field = execution_field("result")
        settle_sql, settle_params = self._settle_sql(moved="moved", now=now)
        rows = self.fetch(
            "WITH v AS (SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::jsonb[], %s::timestamptz[])"
            " AS v(id, lease_token, result, finished_at)),"
            " moved AS (UPDATE executions_execution e SET state = %s, updated_at = v.finished_at,"
            " finished_at = v.finished_at, result = v.result FROM v"
            " WHERE e.id = v.id AND e.state = %s AND e.lease_token = v.lease_token"
            f" RETURNING {', '.join('e.' + c for c in _MOVED_ONE.split(', '))}, v.finished_at),"
            " events AS (INSERT INTO executions_executionevent"
            " (execution_id, at, from_state, to_state, attempt, worker_id, message)"
            " SELECT id, finished_at, %s, %s, attempt, worker_id, 'succeeded' FROM moved),"
            f" settled AS ({settle_sql})"
            " SELECT id, job_id, tenant_id FROM moved",
            [
                [str(s.execution_id) for s in successes],
                [s.lease_token for s in successes],
                [result_field.get_db_prep_save(result_of(s), self.db) for s in successes],
                [s.finished_at for s in successes],
                SUCCEEDED,
                RUNNING,
                RUNNING,
                SUCCEEDED,
                *settle_params,
            ],
        )
        return [(eid, job_id, tenant_id, SUCCEEDED) for eid, job_id, tenant_id in rows]

    def move_set(
        self,
        *,
        source: str,
        target: str,
        now: datetime,
        where: str,
        params: Sequence[Any],
        assignments: str = "",
        assignment_params: Sequence[Any] = (),
        message: str = "",
    ) -> tuple[list[Moved], list[Change]]:
        sql, sql_params = self._move_set_sql(source, target, now, where, params, assignments, assignment_params)
        # The events are written by the same statement: the moved rows never travel to Python and
        # back, which for the dispatcher's batches of 1,000 was a third of the claim's time.
        sql = f"WITH moved AS ({sql}), events AS ({_EVENTS_OF_MOVED}) SELECT {MOVED_COLUMNS} FROM moved"
        sql_params += [now, str(source), str(target), message]
        # No savepoint inside a caller's transaction (the dispatcher's, the sweeper's): one
        # statement needs none, and SAVEPOINT and RELEASE were two more round trips per claim.
        # Rows in binary: a claim's 1,000 took 5.5 ms to read as text, 2.7 in binary.
        with transaction.atomic(savepoint=False):
            moved = [Moved(*row) for row in self._execute(self.db, sql, sql_params, binary_rows=True)]
            if moved and target in FINISHED:
                self.settle_jobs(job_ids=list({m.job_id for m in moved}), now=now)
        return moved, [(m.id, m.job_id, m.tenant_id, target) for m in moved]

    def id_in(self, ids: Sequence[Any]) -> tuple[str, list]:
        return "id = ANY(%s)", [list(ids)]

    @contextlib.contextmanager
    def pipelined(self) -> Iterator[None]:
        # psycopg's pipeline mode: on this project's benchmark machine a round trip cost ~0.1 ms
        # of PostgreSQL's CPU and ~0.15 ms of ours whatever the statement, and an API write
        # made two more than it needs (its BEGIN, its COMMIT).
        db = self.db
        db.ensure_connection()
        with db.wrap_database_errors, db.connection.pipeline():
            yield

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        # Held by _execute, then sent as one statement: each write a data-modifying CTE, any one
        # SELECT (a wake-up's pg_notify) the main query. In pipeline mode each statement cost
        # psycopg about 0.1 ms of Python (a cursor, its parameters' dumpers, a pass of the
        # pipeline's generator), a fifth of a POST /v1/jobs's web CPU for its five writes.
        if getattr(_held, "writes", None) is not None:  # inside another such block: that one sends
            yield
            return
        writes: list[tuple[str, Sequence[Any]]] = []
        _held.writes = writes
        try:
            yield
        finally:
            _held.writes = None
        if not writes:
            return
        if len(writes) == 1:
            self._execute(self.db, *writes[0], returns=False)
            return
        selects = [i for i, (sql, _) in enumerate(writes) if sql.lstrip()[:6].upper() == "SELECT"]
        if len(selects) > 1:  # not what a create writes; sent one by one rather than refused
            for sql, params in writes:
                self._execute(self.db, sql, params, returns=False)
            return
        main = selects[0] if selects else len(writes) - 1
        ctes = [write for i, write in enumerate(writes) if i != main]
        sql = "WITH " + ", ".join(f"w{i} AS ({cte})" for i, (cte, _) in enumerate(ctes)) + " " + writes[main][0]
        params = [param for _, each in [*ctes, writes[main]] for param in each]
        self._execute(self.db, sql, params, returns=False)

    def insert_new(self, rows: Sequence[Model]) -> None:
        # One statement with an array parameter per column, as record_events: bulk_create binds a
        # parameter per value and builds that SQL in Python, which for 1,000 jobs and their 1,000
        # executions was over half of a bulk submission's time.
        if not rows:
            return
        db = self.db
        insert = _insert_of(type(rows[0]), db.alias)
        # What a save fills (created_at, updated_at), filled on the instances too: a time once
        # for the batch, whose rows one statement writes at one instant (a clock read per row and
        # per field was a twentieth of a bulk create, and left the answer's rows no time in common).
        for field in insert.stamped:
            stamp = field.pre_save(rows[0], True)
            for row in rows[1:]:
                setattr(row, field.attname, stamp)
        for field in insert.filled:
            for row in rows:
                field.pre_save(row, True)
        # Values go as the fields hold them (str, int, UUID, aware datetime), which psycopg adapts;
        # only JSON needs the field's own adapter. Preparing every value the ORM's way, or even
        # asking each field for each row's value, cost as much again as the statement.
        values = list(map(insert.read, rows))
        if len(rows) == 1:
            # One row (a single create): its values as they are. A one-element array per column
            # cost psycopg a look at each list's element types, a quarter of the web's CPU for
            # a POST /v1/jobs (profiled).
            params: list = [
                field.get_db_prep_save(value, db) if field else value
                for field, value in zip(insert.json, values[0], strict=True)
            ]
            self._execute(db, insert.one, params, binary=True, returns=False)
            return
        params = []
        for json_field, column in zip(insert.json, zip(*values, strict=True), strict=True):
            if json_field:
                params.append([json_field.get_db_prep_save(value, db) for value in column])
            elif column.count(column[0]) == len(column):
                # The same for every row (a batch's tenant, pool, states, policies, times: most
                # columns), sent once: psycopg writes an array element by element in Python, and
                # its columns of equal values were most of what a bulk create's statement cost
                # us. Equal values are one value of the column's type. JSON columns go whole:
                # {"a": 1} == {"a": True} in Python, yet they are other JSON.
                params.append([column[0]])
            else:
                params.append(list(column))
        self._execute(db, insert.many, [*params, len(rows)], binary=True, returns=False)

    def record_events(
        self, rows: Sequence[tuple[Any, int, str]], *, source: str, target: str, now: datetime, message: str = ""
    ) -> None:
        if not rows:
            return
        # One statement with three array parameters instead of a model instance and seven
        # parameters per row: for the dispatcher's batch of 1,000 this was half of the claim's time.
        self._execute(
            self.db,
            "INSERT INTO executions_executionevent"
            " (execution_id, at, from_state, to_state, attempt, worker_id, message)"
            " SELECT r.execution_id, %s, %s::text, %s::text, r.attempt, r.worker_id, %s::text"
            " FROM unnest(%s::uuid[], %s::integer[], %s::text[]) AS r(execution_id, attempt, worker_id)",
            [
                now,
                str(source),
                str(target),
                message,
                # UUIDs: a binary parameter's type is its values' own (a str would be text).
                [as_uuid(execution_id) for execution_id, _, _ in rows],
                [attempt for _, attempt, _ in rows],
                [worker_id or "" for _, _, worker_id in rows],
            ],
            binary=True,
            returns=False,
        )

    def create_fires(self, fires: Sequence[Fire], *, now: datetime) -> int:
        if not fires:
            return 0
        # One statement for the batch: the rows as arrays, ON CONFLICT on the one-per-fire index
        # (a fire made already is no error and makes no event), the events from what was made.
        # Their trace contexts are written only when tracing made some: else the column's default.
        traced = any(f.traceparent for f in fires)
        # In binary, as insert_new's arrays: their text form, written in Python, was a fifth of a
        # herd's claim in Python.
        rows = self._execute(
            self.db,
            "WITH v AS (SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::varchar[], %s::smallint[],"
            f" %s::timestamptz[]{', %s::varchar[]' if traced else ''})"
            f" AS v(job_id, tenant_id, pool, priority, scheduled_for{', traceparent' if traced else ''})),"
            " made AS (INSERT INTO executions_execution (id, job_id, tenant_id, pool, priority, origin, attempt,"
            " state, scheduled_for, available_at, lease_token, publish_count, worker_id, error, traceback,"
            f" step, created_at, updated_at{', traceparent' if traced else ''})"
            " SELECT gen_random_uuid(), v.job_id, v.tenant_id, v.pool, v.priority, %s, 1, %s, v.scheduled_for,"
            f" v.scheduled_for, 0, 0, '', '', '', '', %s, %s{', v.traceparent' if traced else ''} FROM v"
            " ON CONFLICT (job_id, scheduled_for, step) WHERE origin = 'SCHEDULE' DO NOTHING RETURNING id),"
            " events AS (INSERT INTO executions_executionevent"
            " (execution_id, at, from_state, to_state, attempt, worker_id, message)"
            " SELECT id, %s, '', %s, 1, '', 'scheduled' FROM made)"
            " SELECT count(*) FROM made",
            [
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
                now,
                PENDING,
            ],
            binary=True,
        )
        return int(rows[0][0])

    def advance_jobs(self, next_fires: Mapping[Any, datetime]) -> None:
        if not next_fires:
            return
        # Joined to the arrays by primary key: the ORM's CASE over an IN list compares every
        # row with every branch (41 ms for a claim of 500, against a few here). No indexed column
        # changes, so the row's new version stays on its page (a HOT update: jobs 0008).
        self._execute(
            self.db,
            "UPDATE jobs_job SET next_fire_at = v.fire"
            " FROM unnest(%s::uuid[], %s::timestamptz[]) AS v(id, fire) WHERE jobs_job.id = v.id",
            [[as_uuid(job_id) for job_id in next_fires], list(next_fires.values())],
            binary=True,
            returns=False,
        )

    def notify_due(self, due: datetime) -> None:
        # Work due beyond WAKE_HORIZON needs no wake-up: every dispatcher asks for the next due time
        # at least every TICKWORK_POLL_SECONDS (under a minute, README), so it learns of it before
        # then. Most creates are for later: they no longer wake every dispatcher, nor take the
        # lock NOTIFY takes at commit (a third of a create's PostgreSQL CPU on the benchmark VM).
        if due > datetime.now(UTC) + WAKE_HORIZON:
            return
        self._execute(self.db, "SELECT pg_notify(%s, %s)", [CHANNEL, due.isoformat()], returns=False)

    def due_listener(self) -> DueListener:
        return Listener(self.db.get_connection_params())

    def notify_cancel(self, worker_id: str) -> None:
        with self.db.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CANCEL_CHANNEL, worker_id])

    def cancel_listener(self, *, host: str) -> CancelListener:
        # Every worker host hears every request: NOTIFY has no filter, and a cancel is rare.
        return CancelNotifications(self.db.get_connection_params())

    def measure_clock(self) -> datetime:
        with self.db.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            (db_time,) = cursor.fetchone()
        return db_time.astimezone(UTC)

    def _with_events(
        self,
        update_sql: str,
        params: list,
        *,
        source: str,
        target: str,
        now: datetime,
        message: str,
        settle: bool = False,
        returning: str = _MOVED_ONE,
        select: str = f"SELECT {_MOVED_ONE} FROM moved",
    ) -> list[tuple]:
        """Run `update_sql` (an UPDATE of executions) with, in the same statement, an event for
        each row it moved and, with `settle`, the settling of their jobs. Returns what `select`
        reads from `moved`. A worker makes two moves per run: as three to five statements each,
        with BEGIN and COMMIT, they were most of a short run's time."""
        sql = f"WITH moved AS ({update_sql} RETURNING {returning}), events AS ({_EVENTS_OF_MOVED})"
        params = [*params, now, str(source), str(target), message]
        if settle:
            settle_sql, settle_params = self._settle_sql(moved="moved", now=now)
            sql += f", settled AS ({settle_sql})"
            params += settle_params
        return self.fetch(f"{sql} {select}", params)

    @staticmethod
    def _settle_sql(*, moved: str, now: datetime) -> tuple[str, list]:
        """The job's COMPLETE transition (jobs.transitions.jobs_complete) as a step of a
        data-modifying CTE in which the executions in `moved` (columns id, job_id) have just
        reached a terminal state. Every step of such a statement reads the rows as they were
        before it, so this one leaves those executions out rather than seeing them still open."""
        return (
            "UPDATE jobs_job SET state = %s, next_fire_at = NULL, updated_at = %s"
            f" FROM {moved} WHERE jobs_job.id = {moved}.job_id AND jobs_job.state = %s AND jobs_job.type = ANY(%s)"
            " AND NOT EXISTS (SELECT 1 FROM executions_execution other WHERE other.job_id = jobs_job.id"
            f" AND other.id NOT IN (SELECT id FROM {moved}) AND other.state NOT IN ({_FINISHED_STATES_SQL}))",
            [JobState.COMPLETED.value, now, JobState.ACTIVE.value, [t.value for t in ONE_OFF_TYPES]],
        )

    def _execute(
        self,
        db: BaseDatabaseWrapper,
        sql: str,
        params: Sequence[Any],
        *,
        binary: bool = False,
        binary_rows: bool = False,
        returns: bool = True,
    ) -> list[tuple]:
        """`sql` (%s placeholders) as a prepared statement with server-side parameters, each in binary
        with `binary` (%b); rows read in binary by psycopg's C loaders with `binary_rows` (columns no
        Django loader reads: a jsonb would come parsed). Without `returns`, no rows are read."""
        db.ensure_connection()
        raw = db.connection
        if raw.prepare_threshold is None or db.queries_logged:
            # Prepared statements turned off, or query logging on (DEBUG): Django's own cursor,
            # so that it is logged.
            return super()._execute(db, sql, params, returns=returns)
        db.validate_no_broken_transaction()
        if binary:
            sql = sql.replace("%s", "%b")
        writes = getattr(_held, "writes", None)
        if writes is not None and not returns:
            writes.append((sql, params))  # sent at the end of together()'s block
            return []
        # The connection's execute wrappers, error wrapping and transaction state apply as to
        # any query.
        with db.wrap_database_errors, psycopg.Cursor(raw) as cursor:

            def execute(sql, params, many, context):
                return cursor.execute(sql, params, prepare=True, binary=binary_rows)

            for wrapper in reversed(db.execute_wrappers):
                execute = functools.partial(wrapper, execute)
            execute(sql, params, False, {"connection": db, "cursor": cursor})
            return cursor.fetchall() if returns else []


# psycopg parses a query's placeholders once per text, but only texts of at most 50 parameters
# (sparing its cache the ORMs' one-off VALUES lists: psycopg discussion 628). A create's one
# statement (its job, execution, event and version) has 74, the same text every time, and
# parsing it again was 6 % of a POST /v1/jobs's CPU (profiled). Our texts are written once per
# process, so a higher bound keeps them cached; the cache itself stays psycopg's (128 texts).
psycopg._queries.MAX_CACHED_STATEMENT_PARAMS = 200

# The writes a together() block holds, per thread (the store is shared by a process's threads).
_held = threading.local()

# What a notification that cannot be read counts as: due at once.
ALREADY_DUE = datetime(1970, 1, 1, tzinfo=UTC)


def _due(payload: str) -> datetime:
    """The due time a notification carries (not a time we sent: due at once)."""
    try:
        due = datetime.fromisoformat(payload)
    except ValueError:
        return ALREADY_DUE
    return due if due.tzinfo is not None else ALREADY_DUE


class _Listening:
    """A dedicated autocommit connection that LISTENs on `channel`. If it cannot listen
    (PostgreSQL is down or restarting, at start or later), a wait sleeps instead and tries again,
    at once the first time and then after a pause that doubles with each failure, up to
    RETRY_MAX_SECONDS, with one warning per try. Never raises: a role started before the database
    waits for it like every other role, instead of exiting. A notification sent while it is not
    listening is lost: each listener has a fallback (the dispatcher polls, a worker heartbeats)."""

    RETRY_MAX_SECONDS = 30.0
    channel: ClassVar[str]
    purpose: ClassVar[str]  # for the warning: "listening for <purpose> failed"

    def __init__(self, params: dict[str, Any]) -> None:
        self._params = params
        self._conn: psycopg.Connection | None = None
        self._failures = 0
        self._retry_at = float("-inf")  # monotonic
        # Listening from the start: a notification sent before the first wait is not missed.
        self._listen()

    def _listen(self) -> bool:
        """Listen on a new connection, unless the last failure's pause is not over. Whether it listens."""
        if time.monotonic() < self._retry_at:
            return False
        try:
            self._conn = psycopg.connect(**self._params, autocommit=True)
            self._conn.execute(f"LISTEN {self.channel}")
        except psycopg.Error as exc:
            self._failed(exc)
            return False
        self._failures = 0
        return True

    def _failed(self, exc: psycopg.Error) -> None:
        self.close()
        # The first try again is at once (a dropped connection, the database is up), then slower.
        pause = min(self.RETRY_MAX_SECONDS, 2.0 ** (self._failures - 1)) if self._failures else 0.0
        self._failures += 1
        self._retry_at = time.monotonic() + pause
        logger.warning(
            "listening for %s failed (%s); polling until it can listen again (in %.0fs)",
            self.purpose,
            str(exc).strip().split("\n", 1)[0],
            pause,
        )

    def _payloads(self, seconds: float, sleep: Callable[[float], Any]) -> list[str]:
        """The payloads of the notifications that came within `seconds` (all that had come by the
        first); none if the wait passed without one, or if it could not listen (then it sleeps)."""
        if seconds <= 0:
            return []
        if self._conn is None and not self._listen():
            sleep(seconds)
            return []
        assert self._conn is not None
        try:
            if not select.select([self._conn.fileno()], [], [], seconds)[0]:
                return []
            # Drain: several may have notified; one wake-up serves them all. A dropped connection
            # is readable too: its farewell reads as no notification, and the next read raises.
            return [n.payload for n in self._conn.notifies(timeout=0)]
        except psycopg.Error as exc:
            self._failed(exc)
            sleep(seconds)
            return []

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None


class Listener(_Listening, DueListener):
    """Wakes a dispatcher: `wait` returns early on a notification of due work; the dispatcher
    polls while it cannot listen and loses no work."""

    channel = CHANNEL
    purpose = "due work"

    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> datetime | None:
        return min((_due(payload) for payload in self._payloads(seconds, sleep)), default=None)


class CancelNotifications(_Listening, CancelListener):
    """Tells a worker's cancel relay which worker processes have a run just asked to cancel
    (`notify_cancel`). The relay picks out its own host's; the rest are other machines'."""

    channel = CANCEL_CHANNEL
    purpose = "cancel requests"

    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> list[str]:
        return self._payloads(seconds, sleep)


class _Insert(NamedTuple):
    read: Callable[[Model], tuple]  # a row's values, column by column
    stamped: list[Field]  # the fields a save fills with the time (auto_now, auto_now_add)
    filled: list[Field]  # the other fields a save fills (a pre_save of their own)
    json: list[Field | None]  # per column, its field if its values need JSON's adapter
    one: str  # a row's values
    many: str  # an array per column (of one element: that value in every row), then the count


# pre_save methods that only read the attribute, unless the field fills itself (auto_now…).
_READ_ONLY_PRE_SAVE = {Field.pre_save, DateField.pre_save, DateTimeField.pre_save, TimeField.pre_save}


@functools.cache
def _insert_of(model: type[Model], alias: str) -> _Insert:
    """A model's INSERTs for insert_new, written once per process: writing them for each call
    (quoting every column, asking every field its type) was a seventh of a create's CPU."""
    db = connections[alias]
    meta = model._meta
    # An auto-numbered key (a job version's) is left to the database's sequence.
    fields = [field for field in meta.concrete_fields if field is not meta.auto_field]
    table = db.ops.quote_name(meta.db_table)
    columns = ", ".join(db.ops.quote_name(str(field.column)) for field in fields)  # concrete: never None
    values = ", ".join(f"%s::{field.db_type(db)}" for field in fields)
    # The arrays go in binary: psycopg writes an array's text form in Python, escaping each
    # element, which for a batch of 1,000 jobs cost more than the database's inserts.
    arrays = ", ".join(f"%s::{field.db_type(db)}[] AS c{i}" for i, field in enumerate(fields))
    # A column of one element is that value for each of the n rows. Unnested, not subscripted:
    # taking element i of an array of texts walks it from the start, n² for the batch.
    columns_of = ", ".join(
        f"CASE WHEN cardinality(a.c{i}) = 1 THEN array_fill(a.c{i}[1], ARRAY[a.n]) ELSE a.c{i} END"
        for i in range(len(fields))
    )
    stamped = [field for field in fields if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)]
    return _Insert(
        read=operator.attrgetter(*(field.attname for field in fields)),
        stamped=stamped,
        filled=[f for f in fields if f not in stamped and type(f).pre_save not in _READ_ONLY_PRE_SAVE],
        json=[field if isinstance(field, JSONField) else None for field in fields],
        one=f"INSERT INTO {table} ({columns}) VALUES ({values})",
        many=f"INSERT INTO {table} ({columns}) SELECT u.* FROM (SELECT {arrays}, %s::integer AS n) AS a,"
        f" unnest({columns_of}) AS u",
    )
