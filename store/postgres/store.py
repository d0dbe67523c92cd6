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
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from jobs.models import Job
from store import queries as shared_queries
from store.history import is_happy
from store.interface import CancelListener, DueListener
from store.postgres import partitions, queries
from store.postgres.admission import PostgresAdmission
from store.postgres.fires import create_fires
from store.postgres.inserts import insert_of, json_column
from store.postgres.listeners import CANCEL_CHANNEL, CHANNEL, CancelNotifications, Listener
from store.postgres.reads import PostgresReads
from store.rows import Change, Fire, Moved, Started, Success, as_uuid
from store.shared import SharedStore
from store.statements import update_sql as _update_sql
from store.tables import QUEUED, RUNNING, SUCCEEDED, execution_field

# How far ahead a wake-up is sent for (notify_due): above any dispatcher's TICKWORK_POLL_SECONDS.
WAKE_HORIZON = timedelta(minutes=1)


class PostgresStore(PostgresAdmission, PostgresReads, SharedStore):
    batches_outcomes: ClassVar[bool] = True

    remote_clock: ClassVar[bool] = True

    running_batch: ClassVar[str] = queries.RUNNING_BATCH

    due_notifications: ClassVar[bool] = True

    history_partitioned: ClassVar[bool] = True

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
        happy = is_happy(source, target, message)
        sets = {"state": target, "updated_at": now, **values}
        if not happy:
            sets["history_derived"] = False
        sql, params = _update_sql(self.db, where, sets)
        # Inside a caller's transaction a savepoint is still taken, so a failure here rolls back
        # to it; outside one the statement is its own transaction.
        with contextlib.nullcontext() if not connection.in_atomic_block else transaction.atomic():
            moved = self._with_events(
                sql,
                params,
                source=source,
                target=target,
                now=now,
                message=message,
                reset=target == SUCCEEDED,
                materialise=None if happy else (execution_id, lease_token),
            )
        if len(moved) != 1:
            return None
        execution_id, _, _, job_id, tenant_id = moved[0][:5]
        return (execution_id, job_id, tenant_id, target)

    def start(
        self, *, execution_id: Any, lease_token: int, now: datetime, values: dict[str, Any], lease: timedelta
    ) -> tuple[Started, Change] | None:
        # One statement that also records the event and reads the job and tenant the handler
        # needs: a worker's start costs one round trip, not one per statement.
        sql, params = _update_sql(
            self.db,
            {"id": execution_id, "state": QUEUED, "lease_token": lease_token},
            {"state": RUNNING, "updated_at": now, "lease_expires_at": now + lease, **values},
            # A workflow step's own timeout, if it has one (jobs/workflow.py), else its job's.
            extra_sets=queries.STEP_OR_JOB_TIMEOUT,
            extra_params=[now],
        )
        with contextlib.nullcontext() if not connection.in_atomic_block else transaction.atomic():
            moved = self._with_events(
                sql,
                params,
                source=QUEUED,
                target=RUNNING,
                now=now,
                message="started",
                returning=queries.STARTED,
                select=queries.STARTED_CONTEXT,
            )
        if len(moved) != 1:
            return None
        execution_id, attempt, _, job_id, tenant_id, run_id, step, event_id, pool, trace, *rest = moved[0]
        handler, payload, slug, secret, rate_limit = rest
        # As the ORM converts a read column (no expression: the stubs insist on one).
        payload = Job._meta.get_field("payload").from_db_value(payload, None, self.db)  # type: ignore[arg-type]
        started = Started(
            execution_id,
            job_id,
            attempt,
            handler,
            payload,
            slug,
            secret,
            run_id,
            step,
            event_id,
            pool,
            trace,
            rate_limit,
        )
        return started, (execution_id, job_id, tenant_id, RUNNING)

    def succeed_many(self, successes: Sequence[Success], *, now: datetime, result_of: Callable) -> list[Change]:
        # All in one statement (and so one commit): the moves and their events (at each run's
        # finish). One commit for several outcomes is most of what an outcome costs the database.
        result_field = execution_field("result")
        rows = self.fetch(
            queries.SUCCEED_MANY,
            [
                [str(s.execution_id) for s in successes],
                [s.lease_token for s in successes],
                [result_field.get_db_prep_save(result_of(s), self.db) for s in successes],
                [s.finished_at for s in successes],
                SUCCEEDED,
                RUNNING,
                RUNNING,
                SUCCEEDED,
            ],
        )
        return [(eid, job_id, tenant_id, SUCCEEDED) for eid, job_id, tenant_id in rows]

    def _move_set(
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
        # The events are written by the same statement: the moved rows never travel to Python and
        # back (bench/README.md, "The store's shapes").
        # The happy path's parameters in binary: a claim's thousand ids as a uuid[] (`_id_in`) are
        # six times cheaper to write so than as text (bench/README.md, "The store's shapes").
        binary = is_happy(source, target, message)
        if binary:
            sql, sql_params = self._move_set_sql(source, target, now, where, params, assignments, assignment_params)
            sql = queries.MOVE_SET_WITH_EVENTS.format(move=sql)
            sql_params += [now, str(source), str(target), message]
        else:
            sql = queries.MOVE_SET_MATERIALISING.format(
                where=where, assignments=f", {assignments}" if assignments else ""
            )
            sql_params = [str(source), *params, str(target), now, *assignment_params, str(source)]
            sql_params += queries.materialised_params(source=source, target=target, now=now, message=message)
        # No savepoint inside a caller's transaction (the dispatcher's, the sweeper's): one
        # statement needs none, and SAVEPOINT and RELEASE were two more round trips per claim.
        # Rows in binary: psycopg's C loaders read a claim's rows faster than its text ones.
        with transaction.atomic(savepoint=False):
            moved = [Moved(*row) for row in self._execute(self.db, sql, sql_params, binary=binary, binary_rows=True)]
        return moved, [(m.id, m.job_id, m.tenant_id, target) for m in moved]

    def job_rows(self, job_ids: Sequence[Any], columns: Sequence[str]) -> list[tuple]:
        # In binary both ways, as a claim's rows: a herd's claim reads 1,000 jobs (bench/README.md).
        # No column of these types is converted by the ORM here; a JSON one is read its way.
        if not job_ids or any(Job._meta.get_field(c).get_internal_type() == "JSONField" for c in columns):
            return super().job_rows(job_ids, columns)
        where, params = self._id_in(job_ids)
        sql = shared_queries.JOB_ROWS.format(columns=", ".join(columns), where=where)
        return self._execute(self.db, sql, params, binary=True, binary_rows=True)

    def _id_in(self, ids: Sequence[Any]) -> tuple[str, list]:
        # UUIDs, not their text: a binary parameter's type is its values' own.
        return queries.ID_IN, [[as_uuid(execution_id) for execution_id in ids]]

    @contextlib.contextmanager
    def pipelined(self) -> Iterator[None]:
        # psycopg's pipeline mode: a round trip costs both sides CPU whatever the statement
        # (bench/README.md), and an API write made two more than it needs (its BEGIN, its COMMIT).
        db = self.db
        db.ensure_connection()
        with db.wrap_database_errors, db.connection.pipeline():
            yield

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        # Held by _execute, then sent as one statement: each write a data-modifying CTE, any one
        # SELECT (a wake-up's pg_notify) the main query. Even in pipeline mode each statement costs
        # psycopg Python (a cursor, its parameters' dumpers, a pass of the pipeline's generator),
        # which for a create's five writes was a good part of its web CPU (bench/README.md).
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
        # parameter per value and builds that SQL in Python, which was most of a bulk submission's
        # time (bench/README.md).
        if not rows:
            return
        db = self.db
        insert = insert_of(type(rows[0]), db.alias)
        # What a save fills (created_at, updated_at), filled on the instances too: a time once
        # for the batch, whose rows one statement writes at one instant (a clock read per row and
        # per field cost a bulk create time, and left the answer's rows no time in common).
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
            # cost psycopg a look at each list's element types, much of the web's CPU for a
            # POST /v1/jobs (bench/README.md).
            params: list = [
                field.get_db_prep_save(value, db) if field else value
                for field, value in zip(insert.json, values[0], strict=True)
            ]
            self._execute(db, insert.one, params, binary=True, returns=False)
            return
        params = []
        for json_field, column in zip(insert.json, zip(*values, strict=True), strict=True):
            if json_field:
                params.append(json_column(json_field, column, db))
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
        # parameters per row: for the dispatcher's batches that was much of the claim's time.
        self._execute(
            self.db,
            queries.RECORD_EVENTS,
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
        # One statement for the batch, its rows as arrays, each fire made unless it exists already
        # (store/postgres/fires.py). Their history is derived: no event rows.
        return create_fires(functools.partial(self._execute, self.db, binary=True), fires, now=now)

    def advance_jobs(self, next_fires: Mapping[Any, datetime]) -> None:
        if not next_fires:
            return
        # Joined to the arrays by primary key: the ORM's CASE over an IN list compares every
        # row with every branch. No indexed column
        # changes, so the row's new version stays on its page (a HOT update: jobs 0008).
        self._execute(
            self.db,
            queries.ADVANCE_JOBS,
            [[as_uuid(job_id) for job_id in next_fires], list(next_fires.values())],
            binary=True,
            returns=False,
        )

    def notify_due(self, due: datetime) -> None:
        # Work due beyond WAKE_HORIZON needs no wake-up: every dispatcher asks for the next due time
        # at least every TICKWORK_POLL_SECONDS (under a minute, README), so it learns of it before
        # then. Most creates are for later: they no longer wake every dispatcher, nor take the
        # lock NOTIFY takes at commit (much of a create's PostgreSQL CPU: bench/README.md).
        if due > datetime.now(UTC) + WAKE_HORIZON:
            return
        self._execute(self.db, queries.NOTIFY, [CHANNEL, due.isoformat()], returns=False)

    def due_listener(self) -> DueListener:
        return Listener(self._session_params())

    def notify_cancel(self, worker_id: str) -> None:
        with self.db.cursor() as cursor:
            cursor.execute(queries.NOTIFY, [CANCEL_CHANNEL, worker_id])

    def cancel_listener(self, *, host: str) -> CancelListener:
        # Every worker host hears every request: NOTIFY has no filter, and a cancel is rare.
        return CancelNotifications(self._session_params())

    def _session_params(self) -> dict[str, Any]:
        # A LISTEN needs a session of its own: behind a pooler in transaction mode it connects to
        # PostgreSQL itself, DATABASE_DIRECT_URL (scheduler_project/databases.py).
        return {**self.db.get_connection_params(), **settings.DATABASE_DIRECT}

    def history_partitions_ahead(self, *, now: datetime, days: int) -> int:
        return partitions.create_ahead(now=now, days=days)

    def history_partitions_drop(self, *, before: datetime, limit: int) -> tuple[int, int, int]:
        dropped, kept = partitions.drop_before(before=before)
        return dropped, kept, partitions.default_prune(before=before, limit=limit)

    def measure_clock(self) -> datetime:
        with self.db.cursor() as cursor:
            cursor.execute(queries.CLOCK)
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
        reset: bool = False,
        returning: str = queries.MOVED_ONE,
        select: str = queries.MOVED_ONE_READ,
        materialise: tuple[Any, int | None] | None = None,
    ) -> list[tuple]:
        """Run `update_sql` (an UPDATE of executions) with, in the same statement, an event for
        each row it moved (with `reset`, their jobs' counts of failed fires started again).
        Returns what `select`
        reads from `moved`. A worker makes two moves per run: as three to five statements each,
        with BEGIN and COMMIT, they were most of a short run's time.

        A move of the happy path writes no event for a row whose history is derived; one off it
        (`materialise`: the execution's id and the lease token the move is conditional on, if
        any) writes that row's derived events first (queries.MATERIALISING)."""
        if materialise is None:
            sql = queries.WITH_EVENTS.format(move=update_sql, returning=returning)
            params = [*params, now, str(source), str(target), message]
        else:
            execution_id, lease_token = materialise
            old = "id = %s AND state = %s" + ("" if lease_token is None else " AND lease_token = %s")
            move = update_sql.replace(" WHERE ", queries.FROM_OLD, 1)
            sql = queries.MATERIALISING.format(
                old=old, move=move, returning=f"{returning}, {queries.MATERIALISED_RETURNING}"
            )
            old_params = [as_uuid(execution_id), str(source), *([] if lease_token is None else [lease_token])]
            params = [
                *old_params,
                *params,
                *queries.materialised_params(source=source, target=target, now=now, message=message),
            ]
        if reset:  # a success: its job's count of failed fires starts again
            sql += queries.RESET_FAILED_FIRES.format(moved="moved")
        return self.fetch(f"{sql} {select}", params)

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
# statement (its job, execution, event and version) has more, the same text every time, and
# parsing it again cost a create CPU (bench/README.md). Our texts are written once per process,
# so a higher bound keeps them cached; the cache itself stays psycopg's (128 texts).
psycopg._queries.MAX_CACHED_STATEMENT_PARAMS = 200


# The writes a together() block holds, per thread (the store is shared by a process's threads).
_held = threading.local()
