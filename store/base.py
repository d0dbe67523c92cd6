"""The store: every statement the scheduler runs on its own tables, behind one interface.

The named transitions (executions/transitions.py, jobs/transitions.py) say what moves and which
fields each move writes; the store says how that is written on one database. `Store` is the
embedded default (SQLite), written with the ORM and portable SQL; `PostgresStore`
(store/postgres.py) overrides the statements that PostgreSQL runs faster in another
shape: data-modifying CTEs that write the events and settle the jobs in the same statement,
array parameters, prepared statements, SKIP LOCKED, NOTIFY and the database's clock.

Rows come back typed the same way from both: aware datetimes, UUIDs, ints (`fetch` converts raw
rows as the ORM would). No module outside this package asks which database it is on.
"""

import contextlib
import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, NamedTuple, cast

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.expressions import Combinable
from django.db.models.sql import UpdateQuery

from jobs import transitions as job_transitions
from jobs import workflow
from jobs.models import Job
from store import tables
from store.admission import AdmissionStatements
from store.tables import FINISHED, PENDING, QUEUED, RUNNING, SUCCEEDED, execution_field


class Moved(NamedTuple):
    """A row that a set-based move changed, as the UPDATE returned it. A tuple: a claim makes a
    thousand at a time, five times faster than a frozen dataclass's."""

    id: uuid.UUID
    job_id: uuid.UUID
    tenant_id: int
    pool: str
    attempt: int
    lease_token: int
    worker_id: str
    priority: int
    origin: str
    scheduled_for: datetime
    run_id: uuid.UUID | None = None  # a workflow step's run
    traceparent: str = ""  # the trace it was made in (telemetry/tracing.py); "" when untraced


MOVED_COLUMNS = (
    "id, job_id, tenant_id, pool, attempt, lease_token, worker_id, priority, origin, scheduled_for, run_id, traceparent"
)


@dataclass(frozen=True)
class Fire:
    """A cron fire to make: a new PENDING execution of the job at `scheduled_for`."""

    job_id: uuid.UUID
    tenant_id: int
    pool: str
    priority: int
    scheduled_for: datetime
    traceparent: str = ""  # the fire's own trace (telemetry/tracing.py); "" when untraced


@dataclass(frozen=True)
class Started:
    """A run a worker has just started, with what its handler needs."""

    id: uuid.UUID
    job_id: uuid.UUID
    attempt: int
    handler: str
    payload: Any
    tenant_slug: str
    signing_secret: str
    run_id: uuid.UUID | None = None  # a workflow step's run, and the step's name
    step: str = ""
    event_id: uuid.UUID | None = None  # the event that started it, if one did
    pool: str = ""
    traceparent: str = ""  # the trace its run span joins (telemetry/tracing.py)


@dataclass(frozen=True)
class Success:
    """A handler's return, to be recorded as SUCCEEDED under the lease it ran with."""

    execution_id: Any
    lease_token: int
    result: Any
    finished_at: datetime
    # A workflow step's run: the step's success settles it in the same transaction (executions/steps.py).
    run_id: Any = None


@dataclass(frozen=True)
class Beat:
    """What a heartbeat read back: whether the run was asked to stop, and when it times out."""

    cancel_requested_at: datetime | None
    timeout_at: datetime | None


# (execution id, job id, tenant id, new state) per execution moved: what observers hear.
Change = tuple[Any, Any, int, str]


def as_uuid(value: Any) -> uuid.UUID:
    """An id as raw SQL returns it, as the ORM would: SQLite keeps UUIDs as 32 hex digits."""
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


class Store(AdmissionStatements):
    """The embedded default's statements (SQLite): one writer at a time, no row locks, no NOTIFY.
    Every method runs in the caller's transaction, or in one of its own when there is none."""

    # Whether a worker's outcomes may be recorded in batches on a thread of their own. SQLite
    # has one writer at a time: a second writing thread would only contend.
    batches_outcomes: ClassVar[bool] = False
    # Whether the database's clock is another host's (db_now() measures it) or this host's.
    remote_clock: ClassVar[bool] = False
    # Appended to a batch's inner SELECT so concurrent sweepers take disjoint rows.
    skip_locked: ClassVar[str] = ""
    # How often a dispatcher must look for due work when nothing wakes it.
    due_notifications: ClassVar[bool] = False
    # A pool sample's bucket: whole buckets (seconds, the second parameter) since the first
    # parameter. Half a second more: julianday's arithmetic is in floating point.
    sample_bucket: ClassVar[str] = "CAST(((julianday(s.at) - julianday(%s)) * 86400.0 + 0.5) / %s AS INTEGER)"

    @property
    def db(self) -> BaseDatabaseWrapper:
        return connections[DEFAULT_DB_ALIAS]

    # --- one execution ---------------------------------------------------------------------------

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
        """UPDATE one execution from `source` to `target` (under `lease_token`, when given) with
        `values`, write its event and, on a terminal state, settle its job. Returns the change,
        or None when the row was not in `source` (nothing written)."""
        where: dict[str, Any] = {"id": execution_id, "state": source}
        if lease_token is not None:
            where["lease_token"] = lease_token
        with transaction.atomic():
            executions = tables.execution()._default_manager
            if executions.filter(**where).update(state=target, updated_at=now, **values) != 1:
                return None
            row = (
                tables.execution()
                ._default_manager.values("attempt", "worker_id", "job_id", "tenant_id")
                .get(pk=execution_id)
            )
            self.record_events(
                [(execution_id, row["attempt"], row["worker_id"])],
                source=source,
                target=target,
                now=now,
                message=message,
            )
            if target in FINISHED:
                self.settle_jobs(job_ids=[row["job_id"]], now=now)
        return (execution_id, row["job_id"], row["tenant_id"], target)

    def start(
        self, *, execution_id: Any, lease_token: int, now: datetime, values: dict[str, Any], lease: timedelta
    ) -> tuple[Started, Change] | None:
        """QUEUED → RUNNING with `values`, its lease until now + lease and its timeout until now +
        the job's timeout; reads what the handler needs."""
        row: Any = (
            tables.execution()
            ._default_manager.select_related("job", "tenant", "run")
            .filter(pk=execution_id, state=QUEUED, lease_token=lease_token)
            .first()
        )
        if row is None:
            return None
        timeout_sec = row.job.timeout_sec
        if row.run is not None:
            timeout_sec = workflow.step_of(row.run.steps, row.step).get("timeoutSec") or timeout_sec
        change = self.move(
            execution_id=execution_id,
            source=QUEUED,
            target=RUNNING,
            now=now,
            lease_token=lease_token,
            message="started",
            values={
                **values,
                "lease_expires_at": now + lease,
                "timeout_at": now + timedelta(seconds=timeout_sec),
            },
        )
        if change is None:
            return None
        job, tenant = row.job, row.tenant
        started = Started(
            row.pk,
            row.job_id,
            row.attempt,
            job.handler,
            job.payload,
            tenant.slug,
            tenant.signing_secret,
            row.run_id,
            row.step,
            row.event_id,
            row.pool,
            row.traceparent,
        )
        return started, change

    def succeed_many(self, successes: Sequence[Success], *, now: datetime, result_of: Callable) -> list[Change]:
        """RUNNING → SUCCEEDED for each run still under its lease token, its event at its finish."""
        changes = []
        for success in successes:
            change = self.move(
                execution_id=success.execution_id,
                source=RUNNING,
                target=SUCCEEDED,
                now=success.finished_at,
                lease_token=success.lease_token,
                message="succeeded",
                values={"finished_at": success.finished_at, "result": result_of(success)},
            )
            if change is not None:
                changes.append(change)
        return changes

    def heartbeat(self, *, execution_id: Any, lease_token: int, now: datetime, lease: timedelta) -> Beat | None:
        """Extend a RUNNING run's lease for the worker holding `lease_token`; None if it does not."""
        db_id = tables.execution()._meta.pk.get_db_prep_value(as_uuid(execution_id), self.db)
        rows = self.fetch(
            "UPDATE executions_execution SET lease_expires_at = %s, heartbeat_at = %s"
            " WHERE id = %s AND state = 'RUNNING' AND lease_token = %s"
            " RETURNING cancel_requested_at, timeout_at",
            [now + lease, now, db_id, lease_token],
            read_as=[execution_field("cancel_requested_at"), execution_field("timeout_at")],
        )
        return Beat(*rows[0]) if rows else None

    # --- sets of executions ------------------------------------------------------------------------

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
        """Move every execution in `source` matching `where` (SQL over the executions table) to
        `target` in one UPDATE … RETURNING, with `assignments` (SQL SET clauses), and write their
        events and, on a terminal state, settle their jobs."""
        sql, sql_params = self._move_set_sql(source, target, now, where, params, assignments, assignment_params)
        with transaction.atomic(savepoint=False):
            moved = [Moved(*row) for row in self.fetch(sql, sql_params, read_as=_moved_fields())]
            if moved:
                self.record_events(
                    [(m.id, m.attempt, m.worker_id) for m in moved],
                    source=source,
                    target=target,
                    now=now,
                    message=message,
                )
                if target in FINISHED:
                    self.settle_jobs(job_ids=list({m.job_id for m in moved}), now=now)
        return moved, [(m.id, m.job_id, m.tenant_id, target) for m in moved]

    @staticmethod
    def _move_set_sql(source, target, now, where, params, assignments, assignment_params) -> tuple[str, list]:
        sql = (
            "UPDATE executions_execution SET state = %s, updated_at = %s"
            + (f", {assignments}" if assignments else "")
            + f" WHERE state = %s AND ({where})"
            f" RETURNING {MOVED_COLUMNS}"
        )
        return sql, [target.value, now, *assignment_params, source.value, *params]

    def batch_of(self, state: str, condition: str) -> str:
        """SQL: the ids of up to %s (a parameter) executions in `state` matching `condition`."""
        return (
            f"id IN (SELECT id FROM executions_execution WHERE state = '{state}' AND {condition}"
            f" LIMIT %s{self.skip_locked})"
        )

    def id_in(self, ids: Sequence[Any]) -> tuple[str, list]:
        """SQL and parameters: `id` is one of `ids`."""
        pk = tables.execution()._meta.pk
        return f"id IN ({', '.join(['%s'] * len(ids))})", [pk.get_db_prep_value(as_uuid(i), self.db) for i in ids]

    def pipelined(self) -> AbstractContextManager[None]:
        """Statements sent inside go to the database together, none waiting for the answer to
        the one before (an API request's BEGIN with its token's query, its audit row with its
        COMMIT); an error of one is raised at the block's end, as the database's error. The
        embedded default sends each as it comes."""
        return contextlib.nullcontext()

    def together(self) -> AbstractContextManager[None]:
        """The writes made inside (statements nobody reads back: a create's job, execution, event,
        wake-up and version) are sent at the block's end as one statement; an error of one is
        raised there, as the database's error, and an error inside the block sends nothing.
        They see the database as it was before all of them: none may depend on another's rows
        but through a foreign key (checked at commit). The embedded default sends each as it
        comes."""
        return contextlib.nullcontext()

    def insert_new(self, rows: Sequence[Model]) -> None:
        """Insert new rows of one model (primary keys made in Python, or numbered by the database
        and not read back) in as few statements as the database allows: a bulk submission's jobs,
        their first executions and versions."""
        if rows:
            type(rows[0])._default_manager.bulk_create(rows)

    def record_events(
        self, rows: Sequence[tuple[Any, int, str]], *, source: str, target: str, now: datetime, message: str = ""
    ) -> None:
        """Append history rows (execution id, attempt, worker id). Also a new execution's first
        event (source '') and events that change no state (QUEUED → QUEUED: published again)."""
        event = tables.execution_event()
        event._default_manager.bulk_create(
            [
                event(
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

    def create_fires(self, fires: Sequence[Fire], *, now: datetime) -> int:
        """Insert a PENDING execution (origin SCHEDULE) and its first event for each of `fires`,
        skipping a fire that exists already (the unique index execution_one_per_fire_step decides,
        so two claims can never make one fire twice); a constant number of statements however
        many. Returns how many were made."""
        execution = tables.execution()
        made = [
            execution(
                id=uuid.uuid4(),
                job_id=f.job_id,
                tenant_id=f.tenant_id,
                pool=f.pool,
                priority=f.priority,
                scheduled_for=f.scheduled_for,
                available_at=f.scheduled_for,
                traceparent=f.traceparent,
                created_at=now,
                updated_at=now,
            )
            for f in fires
        ]
        if not made:
            return 0
        # INSERT OR IGNORE: the rows it skipped are told apart by their ids, which are ours.
        execution._default_manager.bulk_create(made, ignore_conflicts=True)
        kept = set(execution._default_manager.filter(pk__in=[e.pk for e in made]).values_list("pk", flat=True))
        made_rows = [(i, 1, "") for i in kept]
        self.record_events(made_rows, source="", target=PENDING, now=now, message="scheduled")
        return len(kept)

    def advance_jobs(self, next_fires: Mapping[Any, datetime]) -> None:
        """Record each job's next fire (job id: time), in one statement."""
        job_transitions.jobs_advance(next_fires=next_fires)

    def settle_jobs(self, *, job_ids: list, now: datetime) -> None:
        job_transitions.jobs_complete(job_ids=job_ids, now=now, open_states=tables.open_states())

    def job_rows(self, job_ids: Sequence[Any], columns: Sequence[str]) -> list[tuple]:
        """`columns` of the jobs `job_ids` (the first column `id`), one row each, in one statement:
        what the dispatcher reads of a claim's recurring jobs. Rows and an array, not instances
        and the ORM's IN list: those were a fifth of a herd's claim in Python (profiled)."""
        if not job_ids:
            return []
        where, params = self.id_in(job_ids)
        read_as: list[Any] = [Job._meta.get_field(column) for column in columns]  # columns named as the fields
        return self.fetch(f"SELECT {', '.join(columns)} FROM jobs_job WHERE {where}", params, read_as=read_as)

    # --- the dispatcher's reads ----------------------------------------------------------------------

    def next_due_at(self, *, after: datetime) -> datetime | None:
        rows = self.fetch(
            """
            SELECT e.available_at FROM executions_execution e
            WHERE e.state = 'PENDING' AND e.available_at > %s
              AND EXISTS (SELECT 1 FROM jobs_job j WHERE j.id = e.job_id AND j.state = 'ACTIVE')
            ORDER BY e.available_at
            LIMIT 1
            """,
            [after],
            read_as=[execution_field("available_at")],
        )
        return rows[0][0] if rows else None

    # --- the pools' history ---------------------------------------------------------------------------

    def pool_buckets(
        self, *, since: datetime, end: datetime, bucket_seconds: int, tenant_ids: Sequence[int] | None
    ) -> list[tuple]:
        """The pools' minute samples (maintenance/services/pool_history.py records them) from `since` to `end`, per
        bucket of `bucket_seconds` and pool, of `tenant_ids` (None: the totals of all): (bucket
        number, pool, the most due and admitted at any minute's end summed over the tenants,
        finished by outcome, started, the sum of started * p50 and the largest p99), bucketed in
        the database, so that a week is a hundred rows to read, not twenty thousand minutes.
        The totals and one tenant's rows are one row per minute and pool (the unique
        constraints), read as they are; several tenants' are summed per minute first (a second
        GROUP BY, which took 26 of this statement's 42 ms over a week when it was always there)."""
        start = self.db.ops.adapt_datetimefield_value(since)
        if tenant_ids is None:  # every tenant: the pools' totals
            scoped = " AND s.tenant_id IS NULL"
        elif tenant_ids:
            scoped = f" AND s.tenant_id IN ({', '.join(['%s'] * len(tenant_ids))})"
        else:
            return []
        one_row = tenant_ids is None or len(tenant_ids) == 1
        add, worst, grouped = ("{}", "{}", "") if one_row else ("SUM({})", "MAX({})", " GROUP BY s.at, s.pool")
        return self.fetch(
            f"""
            SELECT m.b, m.pool, MAX(m.due), MAX(m.admitted), SUM(m.succeeded), SUM(m.failed), SUM(m.cancelled),
                   SUM(m.started), SUM(m.p50w), MAX(m.p99)
            FROM (
                SELECT {self.sample_bucket} AS b, s.at, s.pool, {add.format("s.due")} AS due,
                       {add.format("s.queued + s.running")} AS admitted, {add.format("s.succeeded")} AS succeeded,
                       {add.format("s.failed")} AS failed, {add.format("s.cancelled")} AS cancelled,
                       {add.format("s.started")} AS started, {add.format("s.started * s.lag_p50_ms")} AS p50w,
                       {worst.format("s.lag_p99_ms")} AS p99
                FROM pools_poolsample s WHERE s.at >= %s AND s.at < %s{scoped}{grouped}
            ) AS m
            GROUP BY m.b, m.pool
            """,
            # As the ORM writes times (SQLite: naive UTC text), so that a row at `since` is in.
            [start, bucket_seconds, start, self.db.ops.adapt_datetimefield_value(end), *(tenant_ids or [])],
        )

    # --- wake-ups and the clock ----------------------------------------------------------------------

    def notify_due(self, due: datetime) -> None:
        """Wake sleeping dispatchers once this transaction commits: work is due at `due`. The
        embedded default has no such signal; its dispatchers poll."""

    def due_listener(self) -> "DueListener":
        return DueListener()

    def notify_cancel(self, worker_id: str) -> None:
        """Tell the worker process `worker_id` ("host:pid") once this transaction commits that one
        of its runs was asked to cancel, so that it need not wait for its next heartbeat. The
        embedded default has no such signal; its workers poll (`cancel_listener`)."""

    def cancel_listener(self, *, host: str) -> "CancelListener":
        """What a worker's cancel relay waits on: the worker ids on `host` with a new cancel request."""
        return CancelListener(host=host)

    def measure_clock(self) -> datetime:
        """The database's time now, for db_now() to anchor on (a remote clock only)."""
        raise NotImplementedError

    # --- raw statements ------------------------------------------------------------------------------

    def fetch(self, sql: str, params: Sequence[Any], *, read_as: Sequence[Field | None] = ()) -> list[tuple]:
        """Run one statement and return its rows. `read_as` names the model field each leading
        column holds (None: left as it is); their values are converted as the ORM converts them:
        raw SQL on SQLite gives times as naive UTC and ids as hex strings."""
        db = self.db
        rows = self._execute(db, sql, params)
        converters = _converters(db.alias, tuple(read_as))
        if not converters:
            return rows
        converted = []
        for row in rows:
            values = list(row)
            for index, col, functions in converters:
                for convert in functions:
                    values[index] = convert(values[index], col, db)
            converted.append(tuple(values))
        return converted

    def _execute(
        self, db: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, returns: bool = True
    ) -> list[tuple]:
        """Run `sql`; its rows, or none without `returns` (a statement that gives none)."""
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if returns else []


class DueListener:
    """Waits for due-work notifications; here there are none, so a wait is a sleep."""

    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> datetime | None:
        """Wait up to `seconds`. Returns the earliest due time among the notifications that came,
        or None if none did (the whole wait passed)."""
        sleep(seconds)
        return None

    def close(self) -> None:
        pass


class CancelListener:
    """Finds the worker processes on one host that have a run with a new cancel request, by
    polling: the embedded default is one machine and one SQLite file, and the query reads only
    the RUNNING rows. Each request is reported once (the heartbeat is the fallback should its
    signal be missed)."""

    POLL_SECONDS = 0.3

    def __init__(self, *, host: str) -> None:
        self._prefix = f"{host}:"
        self._reported: set[Any] = set()  # execution ids already reported and still RUNNING

    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> list[str]:
        """Wait up to `seconds` (`sleep` waits, and may return early). Returns the worker ids
        ("host:pid") of the runs asked to cancel since the last call, possibly none."""
        sleep(min(seconds, self.POLL_SECONDS))
        asked = dict(
            tables.execution()
            ._default_manager.filter(
                state=RUNNING, cancel_requested_at__isnull=False, worker_id__startswith=self._prefix
            )
            .values_list("id", "worker_id")
        )
        new = {worker_id for execution_id, worker_id in asked.items() if execution_id not in self._reported}
        self._reported = set(asked)
        return sorted(new)

    def close(self) -> None:
        pass


def _column(name: str) -> str:
    column = execution_field(name).column
    assert column is not None, name  # a concrete field always has one
    return column


@functools.cache
def _moved_fields() -> list[Field]:
    return [execution_field(column) for column in MOVED_COLUMNS.split(", ")]


def update_sql(
    db: BaseDatabaseWrapper,
    where: dict[str, Any],
    values: dict[str, Any],
    *,
    extra_sets: str = "",
    extra_params: Sequence[Any] = (),
) -> tuple[str, list]:
    """UPDATE executions_execution SET `values` WHERE `where` (equalities), as `filter(**where)
    .update(**values)` would write it. Plain values go straight to SQL: the ORM's compiler was a
    third of a worker's CPU per run. An expression (F("attempt") + 1) takes the compiler's way."""
    if any(isinstance(value, Combinable) for value in values.values()):
        assert not extra_sets
        query = cast(UpdateQuery, tables.execution()._default_manager.filter(**where).query.chain(UpdateQuery))
        query.add_update_values(values)
        return query.get_compiler(db.alias).as_sql()
    sql, set_preps, where_preps = _update_shape(tuple(values), tuple(where), extra_sets)
    params = [prep(value, db) for prep, value in zip(set_preps, values.values(), strict=True)]
    params += extra_params
    params += [prep(value, db) for prep, value in zip(where_preps, where.values(), strict=True)]
    return sql, params


@functools.cache
def _update_shape(set_names: tuple[str, ...], where_names: tuple[str, ...], extra_sets: str) -> tuple[str, list, list]:
    """The SQL of an UPDATE that sets `set_names` where `where_names` are equal to parameters, and
    per parameter how to convert its value: a worker writes the same few shapes over and over, and
    building them (and looking up each field's conversion) was most of `update_sql`'s time. Both
    stores quote names alike."""
    meta, quote = tables.execution()._meta, connections[DEFAULT_DB_ALIAS].ops.quote_name
    sets = [f"{quote(_column(name))} = %s" for name in set_names]
    if extra_sets:
        sets.append(extra_sets)
    conditions = [f"{quote(_column(name))} = %s" for name in where_names]
    sql = f"UPDATE {quote(meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    return sql, [_prep(name, save=True) for name in set_names], [_prep(name, save=False) for name in where_names]


def _prep(name: str, *, save: bool) -> Callable[[Any, BaseDatabaseWrapper], Any]:
    """How a value of field `name` becomes a parameter: what the ORM would do, except where the
    driver takes the Python value as it is (strings, numbers, aware datetimes, None)."""
    field = execution_field(name)
    kind = field.get_internal_type()
    if kind in ("CharField", "TextField", "IntegerField", "PositiveIntegerField", "BigIntegerField"):
        return _as_is
    if kind == "DateTimeField":
        return functools.partial(_datetime_prep, field)
    if save:
        return functools.partial(_save_prep, field)
    return functools.partial(_value_prep, field)


def _as_is(value: Any, db: BaseDatabaseWrapper) -> Any:
    return value


def _datetime_prep(field: Field, value: Any, db: BaseDatabaseWrapper) -> Any:
    if value is None or value.tzinfo is not None:
        return value
    return _value_prep(field, value, db)  # naive: the ORM's warning and conversion


def _save_prep(field: Field, value: Any, db: BaseDatabaseWrapper) -> Any:
    return field.get_db_prep_save(value, connection=db)


def _value_prep(field: Field, value: Any, db: BaseDatabaseWrapper) -> Any:
    return field.get_db_prep_value(value, db)


@functools.cache
def _converters(alias: str, read_as: tuple[Field | None, ...]) -> list[tuple[int, Any, list]]:
    """What `fetch` applies to the columns `read_as` names, worked out once per shape of row (a
    bearer token's lookup asks on every API request): per converted column, its index, the column
    as the ORM's compiler selects it (a foreign key as its target's type) and what it applies to a
    value read, the backend's converters then the field's."""
    db = connections[alias]
    converters = []
    for index, field in enumerate(read_as):
        if field is not None:
            col = field.get_col(field.model._meta.db_table)
            functions = [*db.ops.get_db_converters(col), *col.get_db_converters(db)]
            if functions:
                converters.append((index, col, functions))
    return converters
