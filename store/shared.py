"""What both stores run alike: the portable named queries of store/queries.py and the ORM.
Each store (store/sqlite/, store/postgres/) derives from `SharedStore` and writes the rest in
its own shapes; neither derives from the other."""

import abc
import functools
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, NamedTuple

from django.db import connections, transaction
from django.db.models import F, Field, QuerySet

from jobs.models import Job
from store import history, queries, tables
from store.interface import Store
from store.queries import TOKEN
from store.rate_limits import RateLimitOperations
from store.rows import Beat, FailedFire, MovedSet, Republished, Snapshot, as_uuid
from store.statements import Statements, _column
from store.tables import (
    BLOCKED,
    CANCELLED,
    DEAD,
    DISCARDED,
    FAILED_WORKER_LOST,
    FINISHED,
    PENDING,
    QUEUED,
    RUNNING,
    TIMED_OUT,
    execution_field,
)
from tenants.models import ApiToken, Tenant

# What SharedStore._materialise reads of a row.
_MATERIALISED = ("id", "state", "history_derived", *history.DERIVED_FROM)


class SharedStore(RateLimitOperations, Statements, Store):
    # A worker's pools as rows `j(value)` (the snapshot's FROM: jsonb_array_elements_text, json_each).
    POOLS_OF: ClassVar[str]
    # A sweeper's batch as a condition: up to a limit of RUNNING executions matching {condition},
    # disjoint from a concurrent sweeper's.
    running_batch: ClassVar[str]
    # A pool sample's bucket: whole buckets (seconds, the second parameter) since the first parameter.
    sample_bucket: ClassVar[str]

    def heartbeat(self, *, execution_id: Any, lease_token: int, now: datetime, lease: timedelta) -> Beat | None:
        """Extend a RUNNING run's lease for the worker holding `lease_token`; None if it does not."""
        db_id = tables.execution()._meta.pk.get_db_prep_value(as_uuid(execution_id), self.db)
        rows = self.fetch(
            queries.HEARTBEAT,
            [now + lease, now, db_id, lease_token],
            read_as=[execution_field("cancel_requested_at"), execution_field("timeout_at")],
        )
        return Beat(*rows[0]) if rows else None

    def queue(self, execution_ids: Sequence[Any], *, now: datetime, republish_at: datetime) -> MovedSet:
        """PENDING → QUEUED for those of `execution_ids` still PENDING, each under a new lease
        token (the one before + 1), queued now, to be published again at `republish_at`."""
        where, params = self._id_in(execution_ids)
        return self._move_set(
            source=PENDING,
            target=QUEUED,
            now=now,
            where=where,
            params=params,
            assignments=queries.QUEUED_UNDER_A_NEW_LEASE,
            assignment_params=[now, republish_at],
        )

    def discard_dead(self, execution_ids: Sequence[Any], *, now: datetime, message: str) -> MovedSet:
        """DEAD → DISCARDED for those of `execution_ids` still DEAD."""
        where, params = self._id_in(execution_ids)
        return self._move_set(source=DEAD, target=DISCARDED, now=now, where=where, params=params, message=message)

    def rescue_lost(self, *, now: datetime, limit: int, error: str, error_fingerprint: str) -> MovedSet:
        """Up to `limit` RUNNING runs whose lease expired before `now` and that nobody asked to
        cancel → FAILED_WORKER_LOST, finished now with `error` (their event's message too)."""
        return self._running_batch(
            target=FAILED_WORKER_LOST,
            condition=queries.LEASE_EXPIRED,
            params=[now],
            now=now,
            limit=limit,
            assignments=queries.FINISHED_WITH_ERROR,
            assignment_params=[now, error, error_fingerprint],
            message=error,
        )

    def time_out_overdue(
        self, *, now: datetime, before: datetime, limit: int, error: str, error_fingerprint: str
    ) -> MovedSet:
        """Up to `limit` RUNNING runs whose timeout passed before `before` and that nobody asked to
        cancel → TIMED_OUT, finished now with `error` (their event's message too)."""
        return self._running_batch(
            target=TIMED_OUT,
            condition=queries.TIMED_OUT,
            params=[before],
            now=now,
            limit=limit,
            assignments=queries.FINISHED_WITH_ERROR,
            assignment_params=[now, error, error_fingerprint],
            message=error,
        )

    def force_cancel(self, *, now: datetime, requested_before: datetime, limit: int, message: str) -> MovedSet:
        """Up to `limit` RUNNING runs asked to cancel before `requested_before`, or asked and whose
        lease expired before `now` → CANCELLED, finished now."""
        return self._running_batch(
            target=CANCELLED,
            condition=queries.CANCEL_UNHEEDED,
            params=[requested_before, now],
            now=now,
            limit=limit,
            assignments=queries.FINISHED_NOW,
            assignment_params=[now],
            message=message,
        )

    def release_steps(self, *, run_id: Any, names: Sequence[str], now: datetime, message: str) -> MovedSet:
        """BLOCKED → PENDING, due now, for the steps `names` of the run `run_id`."""
        where, params = self._of_run(run_id, names)
        return self._move_set(
            source=BLOCKED,
            target=PENDING,
            now=now,
            where=where,
            params=params,
            assignments=queries.DUE_NOW,
            assignment_params=[now],
            message=message,
        )

    def cancel_steps(self, *, run_id: Any, names: Sequence[str], now: datetime, message: str) -> MovedSet:
        """BLOCKED → CANCELLED, finished now, for the steps `names` of the run `run_id`."""
        where, params = self._of_run(run_id, names)
        return self._move_set(
            source=BLOCKED,
            target=CANCELLED,
            now=now,
            where=where,
            params=params,
            assignments=queries.FINISHED_NOW,
            assignment_params=[now],
            message=message,
        )

    def reblock_steps(
        self, *, run_id: Any, names: Sequence[str], now: datetime, message: str, fresh: Mapping[str, Any]
    ) -> MovedSet:
        """CANCELLED → BLOCKED for the steps `names` of the run `run_id`: their error and traceback
        cleared, the fields `fresh` names set to its values, and a step that had started at its
        next attempt."""
        where, params = self._of_run(run_id, names)
        quote = self.db.ops.quote_name
        return self._move_set(
            source=CANCELLED,
            target=BLOCKED,
            now=now,
            where=where,
            params=params,
            assignments=queries.REBLOCKED + "".join(f", {quote(_column(name))} = %s" for name in fresh),
            assignment_params=list(fresh.values()),
            message=message,
        )

    @abc.abstractmethod
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
        events."""

    @abc.abstractmethod
    def _id_in(self, ids: Sequence[Any]) -> tuple[str, list]:
        """SQL and parameters: `id` is one of `ids`."""

    @staticmethod
    def _move_set_sql(source, target, now, where, params, assignments, assignment_params) -> tuple[str, list]:
        sql = queries.MOVE_SET.format(assignments=f", {assignments}" if assignments else "", where=where)
        return sql, [str(target), now, *assignment_params, str(source), *params]

    def _running_batch(self, *, condition: str, params: list, limit: int, **move: Any) -> MovedSet:
        """`_move_set` of up to `limit` RUNNING executions matching `condition` (SQL), taken as the
        store's `running_batch` says, so that concurrent sweepers take disjoint rows."""
        where = self.running_batch.format(condition=condition)
        return self._move_set(source=RUNNING, where=where, params=[*params, limit], **move)

    def _of_run(self, run_id: Any, names: Sequence[str]) -> tuple[str, list]:
        """SQL and parameters: the steps `names` of the run `run_id`."""
        db_run_id = execution_field("run").get_db_prep_value(run_id, self.db)
        return queries.STEPS_OF_RUN.format(names=", ".join(["%s"] * len(names))), [db_run_id, *names]

    def _materialise(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write as rows the derived events of those of `rows` (each the columns DERIVED_FROM names,
        "id", "state" and "history_derived", read locked in this transaction) whose history is
        derived, oldest first (store/history.py). The caller sets their history_derived false in
        the same transaction, before the move that would overwrite what they were read from."""
        event = tables.execution_event()
        events = [
            made
            for row in rows
            if row["history_derived"]
            for made in history.event_models(event, row["id"], history.as_row(row), state=row["state"])
        ]
        if events:
            event._default_manager.bulk_create(events)

    def request_cancel(self, *, execution_id: Any, now: datetime, message: str) -> bool:
        """A RUNNING execution not yet asked to cancel: its cancel request recorded now, with an
        event (RUNNING → RUNNING) and, at commit, a word to the worker process running it
        (`notify_cancel`). False when it is not RUNNING or was asked already. Off the happy path:
        a derived history is written as rows first (store/history.py)."""
        executions = tables.execution()._default_manager
        with transaction.atomic():
            asked = (
                executions.select_for_update()
                .filter(pk=execution_id, state=RUNNING, cancel_requested_at__isnull=True)
                .values("id", "state", "history_derived", *history.DERIVED_FROM)
                .first()
            )
            requested = 0
            if asked is not None:
                self._materialise([asked])
                requested = executions.filter(pk=execution_id, state=RUNNING).update(
                    cancel_requested_at=now, updated_at=now, history_derived=False
                )
            if requested:
                row = executions.values("attempt", "worker_id").get(pk=execution_id)
                self.record_events(
                    [(execution_id, row["attempt"], row["worker_id"])],
                    source=RUNNING,
                    target=RUNNING,
                    now=now,
                    message=message,
                )
                self.notify_cancel(row["worker_id"])
        return requested == 1

    def republish_stalled(self, *, now: datetime, grace_seconds: float, limit: int) -> list[Republished]:
        """Up to `limit` QUEUED executions not started by their `republish_at`, to be published
        again: each gets an event (QUEUED → QUEUED) and its next grace, `grace_seconds` doubled per
        publish so far. Rows another sweeper holds are skipped. Off the happy path: a derived
        history is written as rows first (store/history.py)."""
        executions = tables.execution()._default_manager
        with transaction.atomic():
            stalled: list[Any] = list(
                executions.select_for_update(skip_locked=True)
                .filter(state=QUEUED, republish_at__lt=now)
                .only(
                    "id", "lease_token", "pool", "priority", "publish_count", "state", "history_derived",
                    *history.DERIVED_FROM,
                )[:limit]
            )  # fmt: skip
            self._materialise([{name: getattr(e, name) for name in _MATERIALISED} for e in stalled])
            for execution in stalled:
                backoff = grace_seconds * 2 ** min(execution.publish_count, 10)
                executions.filter(pk=execution.pk, state=QUEUED, lease_token=execution.lease_token).update(
                    republish_at=now + timedelta(seconds=backoff),
                    publish_count=F("publish_count") + 1,
                    updated_at=now,
                    history_derived=False,
                )
            if stalled:
                self.record_events(
                    [(e.pk, e.attempt, "") for e in stalled],
                    source=QUEUED,
                    target=QUEUED,
                    now=now,
                    message="not started within the publish grace; published again",
                )
        return [Republished(e.pk, e.lease_token, e.pool, e.priority) for e in stalled]

    def lock_finished(self, *, before: datetime, limit: int) -> list[Any]:
        """The ids of up to `limit` executions that finished before `before`, locked until the
        transaction ends; rows another sweeper holds are skipped (so none is pruned twice)."""
        return list(
            tables.execution()
            ._default_manager.select_for_update(skip_locked=True)
            .filter(state__in=FINISHED, finished_at__lt=before)
            .values_list("pk", flat=True)[:limit]
        )

    def count_failed_fire(self, *, execution_id: Any) -> FailedFire | None:
        executions = tables.execution()._default_manager
        # One statement for the job that does not count (most): its setting is read with the row.
        ended = (
            executions.filter(pk=execution_id, state=DEAD, job__pause_after_failures__isnull=False)
            .values("job_id", "run_id")
            .first()
        )
        if ended is None:
            return None
        # The row lock first (SQLite has one writer at a time already): a second worker's fire of
        # the same job waits here until this transaction ends, then reads the count it left.
        job = (
            Job.objects.select_for_update(no_key=True)
            .filter(pk=ended["job_id"], pause_after_failures__isnull=False)
            .values("failed_fires", "pause_after_failures")
            .first()
        )
        if job is None:
            return None
        if (
            ended["run_id"] is not None
            and executions.filter(run_id=ended["run_id"], state__in=[DEAD, DISCARDED]).exclude(pk=execution_id).exists()
        ):
            return None  # the run was counted by the step that ended DEAD before this one
        threshold = job["pause_after_failures"]
        assert threshold is not None  # the filter's
        Job.objects.filter(pk=ended["job_id"]).update(failed_fires=F("failed_fires") + 1)
        return FailedFire(ended["job_id"], job["failed_fires"] + 1, threshold)

    def job_rows(self, job_ids: Sequence[Any], columns: Sequence[str]) -> list[tuple]:
        """`columns` of the jobs `job_ids` (the first column `id`), one row each, in one statement:
        what the dispatcher reads of a claim's recurring jobs. Rows and an array, not instances
        and the ORM's IN list, which cost a herd's claim much of its Python time."""
        if not job_ids:
            return []
        where, params = self._id_in(job_ids)
        read_as: list[Any] = [Job._meta.get_field(column) for column in columns]  # columns named as the fields
        return self.fetch(queries.JOB_ROWS.format(columns=", ".join(columns), where=where), params, read_as=read_as)

    def next_due_at(self, *, after: datetime) -> datetime | None:
        rows = self.fetch(
            queries.NEXT_DUE_AT,
            [after],
            read_as=[execution_field("available_at")],
        )
        return rows[0][0] if rows else None

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
        GROUP BY, most of this statement's time when it was always there)."""
        start = self.db.ops.adapt_datetimefield_value(since)
        if tenant_ids is None:  # every tenant: the pools' totals
            scoped = queries.POOL_TOTALS
        elif tenant_ids:
            scoped = queries.POOL_TENANTS.format(ids=", ".join(["%s"] * len(tenant_ids)))
        else:
            return []
        one_row = tenant_ids is None or len(tenant_ids) == 1
        add, worst, grouped = ("{}", "{}", "") if one_row else ("SUM({})", "MAX({})", queries.PER_MINUTE)
        return self.fetch(
            queries.POOL_BUCKETS.format(
                bucket=self.sample_bucket,
                due=add.format("s.due"),
                admitted=add.format("s.queued + s.running"),
                succeeded=add.format("s.succeeded"),
                failed=add.format("s.failed"),
                cancelled=add.format("s.cancelled"),
                started=add.format("s.started"),
                p50w=add.format("s.started * s.lag_p50_ms"),
                p99=worst.format("s.lag_p99_ms"),
                scoped=scoped,
                grouped=grouped,
            ),
            # As the ORM writes times (SQLite: naive UTC text), so that a row at `since` is in.
            [start, bucket_seconds, start, self.db.ops.adapt_datetimefield_value(end), *(tenant_ids or [])],
            page=True,
        )

    def api_token(self, *, key_hash: str) -> ApiToken | None:
        # One statement written once per process and prepared on PostgreSQL, not a queryset:
        # building and compiling `select_related(...).filter(...)` cost the web more CPU than the
        # query costs to run (bench/README.md, "The store's shapes").
        query = _token_query(self.db.alias)
        with self.pipelined():
            rows = self.fetch(query.sql, [key_hash], read_as=query.fields)
        if not rows:
            return None
        values, count = rows[0], len(query.token_names)
        token = ApiToken.from_db(self.db.alias, query.token_names, values[:count])
        token.tenant = Tenant.from_db(self.db.alias, query.tenant_names, values[count:])
        return token

    def walk_counts(self, walks: Sequence[QuerySet]) -> list[int]:
        compiled = [walk.query.sql_with_params() for walk in walks]
        counts = ", ".join(queries.WALK_COUNT.format(walk=inner) for inner, _ in compiled)
        sql = queries.WALK_COUNTS.format(walks=counts)
        (row,) = self.fetch(sql, [param for _, params in compiled for param in params], page=True)
        return list(row)

    def live_cursors(self) -> tuple[int, int]:
        # Where the page's rows come from: a cursor from the primary, ahead of a replica's page,
        # would skip the live updates between the two.
        ((event_id, audit_id),) = self.fetch(queries.LIVE_CURSORS, [], page=True)
        return event_id or 0, audit_id or 0

    def anything_blocked(self) -> bool:
        return bool(self.fetch(queries.ANYTHING_BLOCKED, []))

    def anything_due(self, *, now: datetime) -> bool:
        """Whether any execution of an active job is due: a dispatcher's look at a quiet moment
        is this one probe of the due index, not the claim's statements."""
        rows = self.fetch(
            queries.ANYTHING_DUE,
            [now],
        )
        return bool(rows)

    def snapshot(self, *, live_since: datetime, admitted: bool = True) -> "Snapshot":
        """What a claim starts from, in one round trip: the live workers (reported since
        `live_since` and not stopped, as pools.registry.live says), what is admitted per pool,
        tenant and state (per pool and state only, tenant 0, when not `admitted`), the tenants'
        concurrency limits, the paused pools and the pools' claim stamps."""
        workers, counts, limits, paused, stamps = [], [], {}, set(), {}
        grouping = {"tenant": "e.tenant_id", "by": ", e.tenant_id"} if admitted else {"tenant": "0", "by": ""}
        rows = self.fetch(
            queries.SNAPSHOT.format(pools_of=self.POOLS_OF, admitted=queries.SNAPSHOT_ADMITTED.format(**grouping)),
            [live_since],
        )
        for kind, text, a, b, c, d in rows:
            if kind == "w":
                workers.append(([text], int(b), int(c), float(d), int(a)))
            elif kind == "a":
                counts.append((text, a, "QUEUED" if c else "RUNNING", b))
            elif kind == "p":
                paused.add(text)
            elif kind == "s":
                stamps[text] = a
            else:
                limits[a] = b
        return Snapshot(workers, counts, limits, frozenset(paused), stamps)


class _TokenQuery(NamedTuple):
    sql: str
    fields: tuple[Field, ...]  # the columns' fields: the token's, then its tenant's
    token_names: list[str]
    tenant_names: list[str]


@functools.cache
def _token_query(alias: str) -> _TokenQuery:
    token_fields, tenant_fields = ApiToken._meta.concrete_fields, Tenant._meta.concrete_fields
    quote = connections[alias].ops.quote_name
    selected = [f"t.{quote(str(field.column))}" for field in token_fields]
    selected += [f"n.{quote(str(field.column))}" for field in tenant_fields]
    return _TokenQuery(
        sql=TOKEN.format(
            columns=", ".join(selected), tokens=quote(ApiToken._meta.db_table), tenants=quote(Tenant._meta.db_table)
        ),
        fields=(*token_fields, *tenant_fields),
        token_names=[field.attname for field in token_fields],
        tenant_names=[field.attname for field in tenant_fields],
    )
