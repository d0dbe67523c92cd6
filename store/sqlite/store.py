"""The embedded default's store (SQLite): one writer at a time, no row locks, no NOTIFY; written
with the ORM and portable SQL. Its named queries are in store/sqlite/queries.py."""

import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.db import transaction
from django.db.models import Model

from jobs import transitions as job_transitions
from jobs import workflow
from store import history, queries, tables
from store.interface import CancelListener, DueListener
from store.rows import Change, Fire, Moved, MovedSet, Started, Success, as_uuid
from store.shared import SharedStore
from store.sqlite import queries as sqlite_queries
from store.sqlite.admission import SqliteAdmission
from store.sqlite.listeners import CancelPoller, Sleeper
from store.sqlite.reads import SqliteReads
from store.statements import moved_fields
from store.tables import QUEUED, RUNNING, SUCCEEDED

# What a move off the happy path reads of a row before it writes (SharedStore._materialise).
MATERIALISED = ("id", "state", "history_derived", *history.DERIVED_FROM)


class SqliteStore(SqliteAdmission, SqliteReads, SharedStore):
    # Whether a worker's outcomes may be recorded in batches on a thread of their own. SQLite
    # has one writer at a time: a second writing thread would only contend.
    batches_outcomes: ClassVar[bool] = False

    # Whether the database's clock is another host's (db_now() measures it) or this host's.
    remote_clock: ClassVar[bool] = False

    running_batch: ClassVar[str] = sqlite_queries.RUNNING_BATCH

    # How often a dispatcher must look for due work when nothing wakes it.
    due_notifications: ClassVar[bool] = False

    # A plain table: a pruned execution's events go with it (the embedded default stays simple).
    history_partitioned: ClassVar[bool] = False

    # A pool sample's bucket: whole buckets (seconds, the second parameter) since the first
    # parameter. Half a second more: julianday's arithmetic is in floating point.
    sample_bucket: ClassVar[str] = sqlite_queries.SAMPLE_BUCKET

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
        `values` and write its event. Returns the change,
        or None when the row was not in `source` (nothing written). A move of the happy path
        writes no event for a row whose history is derived; one off it writes that history as
        rows first (store/history.py): one writer at a time, so what is read here is what the
        update then changes."""
        where: dict[str, Any] = {"id": execution_id, "state": source}
        if lease_token is not None:
            where["lease_token"] = lease_token
        happy = history.is_happy(source, target, message)
        with transaction.atomic():
            executions = tables.execution()._default_manager
            if not happy:
                before = executions.filter(**where).values(*MATERIALISED).first()
                if before is None:
                    return None
                self._materialise([before])
                values = {**values, "history_derived": False}
            if executions.filter(**where).update(state=target, updated_at=now, **values) != 1:
                return None
            row = (
                tables.execution()
                ._default_manager.values("attempt", "worker_id", "job_id", "tenant_id", "run_id", "history_derived")
                .get(pk=execution_id)
            )
            if not row["history_derived"]:
                self.record_events(
                    [(execution_id, row["attempt"], row["worker_id"])],
                    source=source,
                    target=target,
                    now=now,
                    message=message,
                )
            if target == SUCCEEDED and row["run_id"] is None:  # a workflow run's is its settling's
                job_transitions.failed_fires_reset(job_ids=[row["job_id"]])
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
            timeout_sec = workflow.step_of(row.run.steps, row.step).get("timeout_sec") or timeout_sec
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
            job.rate_limit,
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
    ) -> MovedSet:
        """Move every execution in `source` matching `where` (SQL over the executions table) to
        `target` in one UPDATE … RETURNING, with `assignments` (SQL SET clauses), and write their
        events. As `move`: a move of the happy path
        writes no event for a row whose history is derived, one off it writes that history first
        (the rows it will move are read first, and then moved by their ids)."""
        executions = tables.execution()._default_manager
        happy = history.is_happy(source, target, message)
        with transaction.atomic(savepoint=False):
            if not happy:
                ids = [row[0] for row in self.fetch(queries.IDS_IN_STATE.format(where=where), [str(source), *params])]
                if not ids:
                    return [], []
                where, params = self._id_in(ids)
                before = list(executions.filter(id__in=[as_uuid(i) for i in ids]).values(*MATERIALISED))
                self._materialise(before)
                assignments = f"{assignments}, history_derived = %s" if assignments else "history_derived = %s"
                assignment_params = [*assignment_params, False]
            sql, sql_params = self._move_set_sql(source, target, now, where, params, assignments, assignment_params)
            moved = [Moved(*row) for row in self.fetch(sql, sql_params, read_as=moved_fields())]
            derived = set()
            if moved and happy:
                derived = set(
                    executions.filter(id__in=[m.id for m in moved], history_derived=True).values_list("id", flat=True)
                )
            if moved:
                self.record_events(
                    [(m.id, m.attempt, m.worker_id) for m in moved if m.id not in derived],
                    source=source,
                    target=target,
                    now=now,
                    message=message,
                )
        return moved, [(m.id, m.job_id, m.tenant_id, target) for m in moved]

    def _id_in(self, ids: Sequence[Any]) -> tuple[str, list]:
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
        """Insert a PENDING execution (origin SCHEDULE), its history derived, for each of `fires`,
        skipping a fire that exists already (the unique index execution_job_fire decides,
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
        # Their history is derived (store/history.py): no event rows.
        return execution._default_manager.filter(pk__in=[e.pk for e in made]).count()

    def advance_jobs(self, next_fires: Mapping[Any, datetime]) -> None:
        """Record each job's next fire (job id: time), in one statement."""
        job_transitions.jobs_advance(next_fires=next_fires)

    def notify_due(self, due: datetime) -> None:
        """Wake sleeping dispatchers once this transaction commits: work is due at `due`. The
        embedded default has no such signal; its dispatchers poll."""

    def due_listener(self) -> "DueListener":
        return Sleeper()

    def notify_cancel(self, worker_id: str) -> None:
        """Tell the worker process `worker_id` ("host:pid") once this transaction commits that one
        of its runs was asked to cancel, so that it need not wait for its next heartbeat. The
        embedded default has no such signal; its workers poll (`cancel_listener`)."""

    def cancel_listener(self, *, host: str) -> "CancelListener":
        """What a worker's cancel relay waits on: the worker ids on `host` with a new cancel request."""
        return CancelPoller(host=host)

    def history_partitions_ahead(self, *, now: datetime, days: int) -> int:
        return 0

    def history_partitions_drop(self, *, before: datetime, limit: int) -> tuple[int, int, int]:
        return 0, 0, 0

    def measure_clock(self) -> datetime:
        """The database's time now, for db_now() to anchor on (a remote clock only)."""
        raise NotImplementedError
