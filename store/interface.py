"""The store's interface: every operation the scheduler runs on its tables, by name.

Callers say what to do (`queue`, `rescue_lost`, `release_steps`, `api_token`…) with typed
parameters; no SQL, condition or column list crosses this interface. Each database has its own
implementation, siblings behind it: `SqliteStore` (store/sqlite/, the embedded default) and
`PostgresStore` (store/postgres/), each with its SQL in named queries beside it (`queries.py`),
and what both run alike in store/shared.py over the portable named queries of store/queries.py.
store/tests/test_conformance.py runs every operation against the store in use (`make test` on
PostgreSQL, `make test-embedded` on SQLite).

Every operation runs in the caller's transaction, or in one of its own when there is none.
"""

import abc
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from django.db.models import Model, Q, QuerySet
from django.db.models.expressions import Combinable

from store.rows import (
    Beat,
    Change,
    DueRow,
    FailedFire,
    Fire,
    MovedSet,
    Overall,
    PerMinute,
    Republished,
    Snapshot,
    Started,
    Success,
)
from tenants.models import ApiToken

if TYPE_CHECKING:
    from pools.rate_limits import Limit
    from store.rate_limits import LimitFacts


class OverBudget(Exception):
    """A read stopped by its time budget (`Store.statement_budget`)."""


class DueListener(abc.ABC):
    """What a dispatcher waits on: notifications of due work, where the database sends them."""

    @abc.abstractmethod
    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> datetime | None:
        """Wait up to `seconds`. Returns the earliest due time among the notifications that came,
        or None if none did (the whole wait passed)."""

    @abc.abstractmethod
    def close(self) -> None: ...


class CancelListener(abc.ABC):
    """What a worker's cancel relay waits on: the worker ids on its host with a new cancel request."""

    @abc.abstractmethod
    def wait(self, seconds: float, sleep: Callable[[float], Any]) -> list[str]:
        """Wait up to `seconds` (`sleep` waits, and may return early). Returns the worker ids
        ("host:pid") of the runs asked to cancel since the last call, possibly none."""

    @abc.abstractmethod
    def close(self) -> None: ...


class Store(abc.ABC):
    """Every statement of the scheduler, by name. No SQL of its own."""

    # Whether a worker's outcomes may be recorded in batches on a thread of their own.
    batches_outcomes: ClassVar[bool]
    # Whether the database's clock is another host's (db_now() measures it) or this host's.
    remote_clock: ClassVar[bool]
    # Whether dispatchers hear of due work (notify_due), or must look for it.
    due_notifications: ClassVar[bool]
    # Whether `statement_budget` can stop a read that runs long; where it cannot, a caller does
    # not ask for one.
    bounds_statements: ClassVar[bool]
    # Whether the planner reads a partial index for a query that implies its condition without
    # repeating its terms (`state = 'SUCCEEDED'` for `NOT state IN ('QUEUED', 'RUNNING')`), so
    # such an index can leave rows out (executions.models.PartialOnPostgres).
    proves_partial_indexes: ClassVar[bool]
    # Whether the event history is partitioned by day, so that retention leaves a pruned
    # execution's events to their partition's drop (store/postgres/partitions.py).
    history_partitioned: ClassVar[bool]

    # --- one execution ------------------------------------------------------------------------

    @abc.abstractmethod
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
        or None when the row was not in `source` (nothing written)."""
        ...

    @abc.abstractmethod
    def start(
        self, *, execution_id: Any, lease_token: int, now: datetime, values: dict[str, Any], lease: timedelta
    ) -> tuple[Started, Change] | None:
        """QUEUED → RUNNING with `values`, its lease until now + lease and its timeout until now +
        the job's timeout; reads what the handler needs."""
        ...

    @abc.abstractmethod
    def succeed_many(self, successes: Sequence[Success], *, now: datetime, result_of: Callable) -> list[Change]:
        """RUNNING → SUCCEEDED for each run still under its lease token, its event at its finish."""
        ...

    @abc.abstractmethod
    def heartbeat(self, *, execution_id: Any, lease_token: int, now: datetime, lease: timedelta) -> Beat | None:
        """Extend a RUNNING run's lease for the worker holding `lease_token`; None if it does not."""
        ...

    # --- sets of executions: each a named move, one UPDATE … RETURNING with its events --------

    @abc.abstractmethod
    def queue(self, execution_ids: Sequence[Any], *, now: datetime, republish_at: datetime) -> MovedSet:
        """PENDING → QUEUED for those of `execution_ids` still PENDING, each under a new lease
        token (the one before + 1), queued now, to be published again at `republish_at`."""
        ...

    @abc.abstractmethod
    def discard_dead(self, execution_ids: Sequence[Any], *, now: datetime, message: str) -> MovedSet:
        """DEAD → DISCARDED for those of `execution_ids` still DEAD."""
        ...

    @abc.abstractmethod
    def rescue_lost(self, *, now: datetime, limit: int, error: str, error_fingerprint: str) -> MovedSet:
        """Up to `limit` RUNNING runs whose lease expired before `now` and that nobody asked to
        cancel → FAILED_WORKER_LOST, finished now with `error` (their event's message too)."""
        ...

    @abc.abstractmethod
    def time_out_overdue(
        self, *, now: datetime, before: datetime, limit: int, error: str, error_fingerprint: str
    ) -> MovedSet:
        """Up to `limit` RUNNING runs whose timeout passed before `before` and that nobody asked to
        cancel → TIMED_OUT, finished now with `error` (their event's message too)."""
        ...

    @abc.abstractmethod
    def force_cancel(self, *, now: datetime, requested_before: datetime, limit: int, message: str) -> MovedSet:
        """Up to `limit` RUNNING runs asked to cancel before `requested_before`, or asked and whose
        lease expired before `now` → CANCELLED, finished now."""
        ...

    @abc.abstractmethod
    def release_steps(self, *, run_id: Any, names: Sequence[str], now: datetime, message: str) -> MovedSet:
        """BLOCKED → PENDING, due now, for the steps `names` of the run `run_id`."""
        ...

    @abc.abstractmethod
    def cancel_steps(self, *, run_id: Any, names: Sequence[str], now: datetime, message: str) -> MovedSet:
        """BLOCKED → CANCELLED, finished now, for the steps `names` of the run `run_id`."""
        ...

    @abc.abstractmethod
    def reblock_steps(
        self, *, run_id: Any, names: Sequence[str], now: datetime, message: str, fresh: Mapping[str, Any]
    ) -> MovedSet:
        """CANCELLED → BLOCKED for the steps `names` of the run `run_id`: their error and traceback
        cleared, the fields `fresh` names set to its values, and a step that had started at its
        next attempt."""
        ...

    # --- executions without a move ------------------------------------------------------------

    @abc.abstractmethod
    def request_cancel(self, *, execution_id: Any, now: datetime, message: str) -> bool:
        """A RUNNING execution not yet asked to cancel: its cancel request recorded now, with an
        event (RUNNING → RUNNING) and, at commit, a word to the worker process running it
        (`notify_cancel`). False when it is not RUNNING or was asked already."""
        ...

    @abc.abstractmethod
    def republish_stalled(self, *, now: datetime, grace_seconds: float, limit: int) -> list[Republished]:
        """Up to `limit` QUEUED executions not started by their `republish_at`, to be published
        again: each gets an event (QUEUED → QUEUED) and its next grace, `grace_seconds` doubled per
        publish so far. Rows another sweeper holds are skipped."""
        ...

    @abc.abstractmethod
    def lock_finished(self, *, before: datetime, limit: int) -> list[Any]:
        """The ids of up to `limit` executions that finished before `before`, locked until the
        transaction ends; rows another sweeper holds are skipped (so none is pruned twice)."""
        ...

    @abc.abstractmethod
    def history_partitions_ahead(self, *, now: datetime, days: int) -> int:
        """Make the history's partitions of `now`'s day and the `days` after it that are missing,
        each with the rows its day had waiting elsewhere; how many it made (0: all there, or no
        partitions on this store). Idempotent; concurrent callers take turns."""
        ...

    @abc.abstractmethod
    def history_partitions_drop(self, *, before: datetime, limit: int) -> tuple[int, int, int]:
        """Drop the history's partitions wholly before `before`, keeping (writing again) the rows
        of executions that still exist, and delete up to `limit` of those kept rows whose
        execution is gone since: (partitions dropped, rows kept, rows deleted). (0, 0, 0) where
        the history is a plain table (it went with its executions)."""
        ...

    # --- writes -------------------------------------------------------------------------------

    @abc.abstractmethod
    def pipelined(self) -> AbstractContextManager[None]:
        """Statements sent inside go to the database together, none waiting for the answer to
        the one before (an API request's BEGIN with its token's query, its audit row with its
        COMMIT); an error of one is raised at the block's end, as the database's error. The
        embedded default sends each as it comes."""
        ...

    @abc.abstractmethod
    def together(self) -> AbstractContextManager[None]:
        """The writes made inside (statements nobody reads back: a create's job, execution, event,
        wake-up and version) are sent at the block's end as one statement; an error of one is
        raised there, as the database's error, and an error inside the block sends nothing.
        They see the database as it was before all of them: none may depend on another's rows
        but through a foreign key (checked at commit). The embedded default sends each as it
        comes."""
        ...

    @abc.abstractmethod
    def insert_new(self, rows: Sequence[Model]) -> None:
        """Insert new rows of one model (primary keys made in Python, or numbered by the database
        and not read back) in as few statements as the database allows: a bulk submission's jobs,
        their first executions and versions."""
        ...

    @abc.abstractmethod
    def record_events(
        self, rows: Sequence[tuple[Any, int, str]], *, source: str, target: str, now: datetime, message: str = ""
    ) -> None:
        """Append history rows (execution id, attempt, worker id). Also a new execution's first
        event (source '') and events that change no state (QUEUED → QUEUED: published again)."""
        ...

    @abc.abstractmethod
    def create_fires(self, fires: Sequence[Fire], *, now: datetime) -> int:
        """Insert a PENDING execution (origin SCHEDULE) and its first event for each of `fires`,
        skipping a fire that exists already (the unique index execution_job_fire decides,
        so two claims can never make one fire twice); a constant number of statements however
        many. Returns how many were made."""
        ...

    @abc.abstractmethod
    def count_failed_fire(self, *, execution_id: Any) -> FailedFire | None:
        """The execution `execution_id` just ended DEAD (call in the transaction of that move): one
        more consecutive failed fire of its job, when the job has `pause_after_failures`. The job's
        row is locked before it is read, so that several workers ending fires of one job at once
        neither lose a count nor see the same one; a workflow run counts once, by the first of its
        steps to end DEAD. None when nothing was counted. Success resets the count: a move to
        SUCCEEDED of an execution that is not a workflow step does it in its own statement
        (`move`, `succeed_many`), a workflow run that succeeded in its settling."""
        ...

    @abc.abstractmethod
    def advance_jobs(self, next_fires: Mapping[Any, datetime]) -> None:
        """Record each job's next fire (job id: time), in one statement."""
        ...

    @abc.abstractmethod
    def job_rows(self, job_ids: Sequence[Any], columns: Sequence[str]) -> list[tuple]:
        """`columns` of the jobs `job_ids` (the first column `id`), one row each, in one statement:
        what the dispatcher reads of a claim's recurring jobs. Rows and an array, not instances
        and the ORM's IN list, which cost a herd's claim much of its Python time."""
        ...

    # --- the dispatcher's and the dashboard's reads -------------------------------------------

    @abc.abstractmethod
    def next_due_at(self, *, after: datetime) -> datetime | None: ...

    @abc.abstractmethod
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
        ...

    @abc.abstractmethod
    def api_token(self, *, key_hash: str) -> ApiToken | None:
        """The live (not revoked) API token whose key hashes to `key_hash`, its tenant loaded with
        it; None if there is none. Pipelined: in an audited request's transaction, its BEGIN goes
        with the query (one round trip, not two)."""

    # --- the dashboard's reads -------------------------------------------------------------------------

    @abc.abstractmethod
    def walk_counts(self, walks: Sequence[QuerySet]) -> list[int]:
        """How many rows each of `walks` (querysets, each sliced to a cap) has, in one statement."""

    @abc.abstractmethod
    def live_cursors(self) -> tuple[int, int]:
        """Where a page's live feed starts: the newest execution event's id and the newest audit
        row's (0 when there is none), in one statement."""

    @abc.abstractmethod
    def first_of_parts(self, queryset: QuerySet, *, parts: Sequence[Q], order: Sequence[str], limit: int) -> list:
        """The first `limit` rows of `queryset` in `order`, where its rows are the union of
        disjoint `parts` (conditions) each of which an index reads in that order and the whole does
        not: each part's first `limit` by its own index, merged, where the database can."""

    @abc.abstractmethod
    def estimate_rows(self, queryset: QuerySet) -> int | None:
        """The planner's row estimate for a queryset, without reading the rows; None if the
        database gives none."""

    @abc.abstractmethod
    def start_lags(self, started: QuerySet, *, could_run_from: Combinable) -> tuple[PerMinute, Overall]:
        """p50 and p99 of the start lag of `started` (seconds from `could_run_from`, the
        read models' definition: readmodels/start_lag.py), per minute of start and over all."""

    @abc.abstractmethod
    def statement_budget(self, milliseconds: int) -> AbstractContextManager[None]:
        """Run the reads inside within `milliseconds` each, raising OverBudget past it."""

    @abc.abstractmethod
    def newest_first(
        self,
        walks: list[QuerySet],
        everything: QuerySet,
        start: int,
        stop: int,
        order: tuple[str, ...] = ("-scheduled_for", "-id"),
    ) -> list[tuple]:
        """Rows start..stop of the merge of ordered walks (each ordered by `order`, as
        `everything`'s values are: the order's fields, newest first); `everything` is the walks'
        rows as one queryset."""

    # --- wake-ups and the clock ---------------------------------------------------------------

    @abc.abstractmethod
    def notify_due(self, due: datetime) -> None:
        """Wake sleeping dispatchers once this transaction commits: work is due at `due`. The
        embedded default has no such signal; its dispatchers poll."""
        ...

    @abc.abstractmethod
    def due_listener(self) -> "DueListener": ...

    @abc.abstractmethod
    def notify_cancel(self, worker_id: str) -> None:
        """Tell the worker process `worker_id` ("host:pid") once this transaction commits that one
        of its runs was asked to cancel, so that it need not wait for its next heartbeat. The
        embedded default has no such signal; its workers poll (`cancel_listener`)."""
        ...

    @abc.abstractmethod
    def cancel_listener(self, *, host: str) -> "CancelListener":
        """What a worker's cancel relay waits on: the worker ids on `host` with a new cancel request."""
        ...

    @abc.abstractmethod
    def measure_clock(self) -> datetime:
        """The database's time now, for db_now() to anchor on (a remote clock only)."""
        ...

    # --- the claim (scheduling/admission.py decides; these read and record) -------------------

    @abc.abstractmethod
    def anything_blocked(self) -> bool:
        """Whether any execution waits BLOCKED: what a dispatcher's pass asks before it looks for
        buffered fires and runs to release."""
        ...

    @abc.abstractmethod
    def anything_due(self, *, now: datetime) -> bool:
        """Whether any execution of an active job is due: a dispatcher's look at a quiet moment
        is this one probe of the due index, not the claim's statements."""
        ...

    @abc.abstractmethod
    def pools_with_due(self, pools: Sequence[str], *, now: datetime) -> set[str]:
        """Of `pools`, those with a PENDING execution due by `now` (of an active job or not: a claim
        then walks it): one round trip, whatever their number."""
        ...

    @abc.abstractmethod
    def claim_pool(self, pool: str, *, seen: int, counts: tuple[int, int]) -> "tuple[int, int] | None":
        """This claim's turn at `pool`, until its transaction ends, if no other claim has it (then
        None: that one admits the pool's work now). A pool's capacity is a count over what it has
        admitted, which two claims of it side by side would each read without the other's; claims
        of different pools run side by side. Once the turn is this claim's: what the pool has
        admitted, (QUEUED, RUNNING): `counts`, as the claim's snapshot read them when it saw the
        pool's stamp at `seen`, if no other claim of the pool committed since (the claim counts
        itself in the stamp and finds `seen` + 1); else read again. Between, runs may only have
        left the counts (a start, an outcome, a reclaim), never joined them: only a claim does.
        SQLite has one writer at a time already: the claim's transaction holds it throughout."""
        ...

    @abc.abstractmethod
    def hold_tenants(self, tenant_ids: Sequence[int]) -> dict[int, int]:
        """Make the claims that admit a capped tenant's work, or count against a named rate limit,
        take turns until this transaction ends: a tenant's concurrency limit counts what it has
        admitted in every pool, and a limit's clock is shared by every pool. Once the turn is
        this claim's: each of `tenant_ids`' QUEUED + RUNNING (absent: none)."""
        ...

    @abc.abstractmethod
    def snapshot(self, *, live_since: datetime, admitted: bool = True) -> "Snapshot":
        """What a claim starts from, in one round trip: the live workers (reported since
        `live_since` and not stopped, as pools.registry.live says), what is admitted per pool,
        tenant and state (per pool and state only, tenant 0, when not `admitted`: a claim needs
        no more, the capped tenants' it reads under the lock across pools, as `hold_tenants`),
        the tenants' concurrency limits, the paused pools and the pools' claim stamps."""
        ...

    # --- rate limits (pools/rate_limits.py; store/rate_limits.py runs them on both stores) ---

    @abc.abstractmethod
    def claim_rate_limits(self) -> "dict[str, tuple[Limit, float]]":
        """The limits defined, each with the claim's clock (its tat), read under the lock across pools."""
        ...

    @abc.abstractmethod
    def limit_facts(self, execution_ids: Sequence[Any]) -> "list[LimitFacts]":
        """Of the executions `execution_ids`: what says their limits, and the turns they hold."""
        ...

    @abc.abstractmethod
    def turns_due(self, *, pool: str, now: datetime, limit: int) -> list[DueRow]:
        """Up to `limit` executions of active jobs in `pool` whose rate-limit turn has come, the
        earliest turn first."""
        ...

    @abc.abstractmethod
    def give_turns(self, turns: Mapping[Any, datetime]) -> int:
        """The PENDING executions of `turns` wait for their turns: due then, holding them."""
        ...

    @abc.abstractmethod
    def save_claim_clocks(self, tats: Mapping[str, float]) -> None:
        """The claim's clocks of the limits it counted starts against."""
        ...

    @abc.abstractmethod
    def take_start(self, name: str, at: float) -> float | None:
        """Count a start at `at` (seconds since the epoch) against the limit `name` if it conforms:
        None when counted (or the limit is gone), else when it will conform."""
        ...

    @abc.abstractmethod
    def due_in_pool(self, *, pool: str, now: datetime, limit: int) -> list[DueRow]:
        """Up to `limit` executions of active jobs due in `pool` by `now`: HIGH priority first,
        then by due time."""
        ...

    @abc.abstractmethod
    def shares(self, *, pool: str) -> tuple[float, list[tuple[int, int, int | None, float]]]:
        """The pool's virtual time, and for every tenant (id, weight, concurrency limit, finish
        tag in this pool)."""
        ...

    @abc.abstractmethod
    def due_heads(
        self, *, pool: str, priority: int, tenant_ids: Sequence[int], now: datetime
    ) -> list[tuple[int, datetime]]:
        """(tenant id, earliest due time) for each of `tenant_ids` that has due work in `pool`
        at `priority`."""
        ...

    @abc.abstractmethod
    def due_of_tenants(self, *, pool: str, priority: int, quotas: Mapping[int, int], now: datetime) -> list[DueRow]:
        """For each tenant, up to its quota of its executions due in `pool` at `priority`, in
        due order."""
        ...

    @abc.abstractmethod
    def save_shares(self, *, pool: str, finish_tags: Mapping[int, float], virtual_time: float) -> None:
        """Write the tags the claim moved on."""
        ...
