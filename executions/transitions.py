"""The execution's named transitions: every write of an execution's state is one of these.

Each owns the fields it writes and the source states it accepts (declared with `@moves`, checked
against the table in executions/states.py when this module loads), is one conditional write
guarded by the source state (and, for a worker's writes, its lease token), records its event in
the same transaction, and returns what it moved. An event of the happy path (made, queued,
started, succeeded) is recorded by the columns the move writes, not as an ExecutionEvent row, and
the first move off that path writes those events as rows first (store/history.py says how and
why; executions/history.py reads the history). Zero rows is an answer, not
success: every caller handles it. How each is written on the database in use is the store's
business (store/); what follows a move is done here: observers hear of it after commit
(executions/observers.py), and work that became due wakes the dispatchers (`notify_due`).

What a handler produced (result, error, traceback, message) is made storable first
(executions/storable.py), so a character the database refuses cannot fail the statement that
records an outcome.
"""

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from executions import observers, steps, tallies
from executions.fingerprints import fingerprint
from executions.models import Execution, Origin, history_left_to_partitions
from executions.moves import FRESH_ATTEMPT, accepts, move_one, moves
from executions.moves import NAMED as NAMED  # the table of named transitions, for its test
from executions.states import REDRIVABLE, RETRYABLE, TERMINAL, ExecutionState
from executions.storable import storable_json, storable_text
from jobs import transitions as job_transitions
from jobs.rows import new_row
from store import Beat, Fire, Moved, MovedSet, Republished, Started, Success, store
from telemetry import tracing

S = ExecutionState


def _move(*, execution_id: Any, source: ExecutionState, target: ExecutionState, now: datetime, **kw: Any) -> bool:
    """One execution from `source` to `target` (moves.move_one); a step that ended settles its run
    in the same transaction (executions/steps.py)."""
    if target not in TERMINAL:
        return move_one(execution_id=execution_id, source=source, target=target, now=now, **kw)
    with transaction.atomic():
        moved = move_one(execution_id=execution_id, source=source, target=target, now=now, **kw)
        if moved:
            steps.settle_runs_of([execution_id], now=now)
    return moved


# --- made -------------------------------------------------------------------------------------------


def create(
    *,
    job: Any,
    scheduled_for: datetime,
    now: datetime,
    origin: str = Origin.SCHEDULE,
    wake: bool = True,
    event_id: Any = None,
) -> Execution:
    """∅ → PENDING: a new execution of `job` due at `scheduled_for`. Its first event is told by
    its columns (made at `now`, by `origin`: store/history.py), not written as a row. With
    `wake`, dispatchers are woken for it (the dispatcher that makes a cron job's next fire needs
    no wake-up: it looks again itself)."""
    execution = Execution.objects.create(
        job=job,
        tenant_id=job.tenant_id,
        pool=job.pool,
        priority=job.priority,
        origin=origin,
        event_id=event_id,
        scheduled_for=scheduled_for,
        available_at=scheduled_for,
        traceparent=tracing.traceparent(),
        created_at=now,
    )
    if wake:
        store().notify_due(scheduled_for)
    return execution


def create_fires(*, fires: Sequence[Fire], now: datetime) -> int:
    """∅ → PENDING for many cron fires at once (the dispatcher's next fires): each a new
    execution with its first event, in a constant number of statements. A fire that exists
    already is skipped, not an error (the database's unique index on (job, fire) decides).
    No wake-up: the dispatcher that makes them looks again itself. Returns how many were made."""
    return store().create_fires(fires, now=now)


def advance_jobs(*, next_fires: Mapping[Any, datetime]) -> None:
    """Record the jobs' next fires (job id: time) beside the fires create_fires made, in one
    statement (the job's state does not change, nor its updated_at: see jobs_advance)."""
    store().advance_jobs(next_fires)


def create_many(*, runs: Sequence[tuple[Any, datetime]], now: datetime) -> list[Execution]:
    """∅ → PENDING for many jobs at once: `runs` is (job, scheduled_for) pairs, each made a
    scheduled execution, as `create` makes one (its first event told by its columns). Two
    statements whatever the count (the executions, one wake-up for the earliest), so a bulk
    submission costs no round trip per job. Returns the executions in the order of `runs`."""
    if not runs:
        return []
    trace = tracing.traceparent()
    executions = [
        new_row(
            Execution,
            {
                "job": job,
                "tenant_id": job.tenant_id,
                "pool": job.pool,
                "priority": job.priority,
                "origin": Origin.SCHEDULE,
                "scheduled_for": scheduled_for,
                "available_at": scheduled_for,
                "traceparent": trace,
                "created_at": now,
            },
        )
        for job, scheduled_for in runs
    ]
    store().insert_new(executions)
    store().notify_due(min(scheduled_for for _, scheduled_for in runs))
    return executions


# --- the dispatcher ----------------------------------------------------------------------------------


@moves([S.PENDING], S.QUEUED)
def queue_many(execution_ids: Sequence[Any], *, now: datetime, publish_grace: timedelta) -> list[Moved]:
    """PENDING → QUEUED for those of `execution_ids` still PENDING, each under a new lease token,
    to be published again at now + publish_grace if no worker starts it."""
    moved, changes = store().queue(execution_ids, now=now, republish_at=now + publish_grace)
    observers.announce(changes)
    return moved


@moves([S.QUEUED], S.CANCELLED)
def skip(*, execution: Moved, now: datetime, reason: str) -> bool:
    """QUEUED → CANCELLED for a fire the dispatcher just claimed and a policy says must not run."""
    return _move(
        execution_id=execution.id,
        source=S.QUEUED,
        target=S.CANCELLED,
        now=now,
        lease_token=execution.lease_token,
        message=reason,
        finished_at=now,
        republish_at=None,
    )


# --- a worker ----------------------------------------------------------------------------------------


@moves([S.QUEUED], S.RUNNING)
def start(*, execution_id: Any, lease_token: int, now: datetime, worker_id: str, lease: timedelta) -> Started | None:
    """QUEUED → RUNNING for the worker that holds `lease_token`: its lease runs until now + lease
    and its timeout until now + the job's timeout. Returns the run with what its handler needs,
    or None when the execution is not (any more) QUEUED under that token."""
    started = store().start(
        execution_id=execution_id,
        lease_token=lease_token,
        now=now,
        lease=lease,
        values={"started_at": now, "heartbeat_at": now, "worker_id": worker_id, "republish_at": None},
    )
    if started is None:
        return None
    observers.announce([started[1]])
    return started[0]


def heartbeat(*, execution_id: Any, lease_token: int, now: datetime, lease: timedelta) -> Beat | None:
    """Extend a RUNNING run's lease (no move): what the worker must know back, or None when the
    lease is no longer this worker's."""
    return store().heartbeat(execution_id=execution_id, lease_token=lease_token, now=now, lease=lease)


def save_checkpoint(*, execution_id: Any, lease_token: int, data: Any, now: datetime) -> bool:
    """A RUNNING run's checkpoint (no move), for the worker holding `lease_token` only."""
    return (
        Execution.objects.filter(pk=execution_id, state=S.RUNNING, lease_token=lease_token).update(
            checkpoint=storable_json(data), updated_at=now
        )
        == 1
    )


@moves([S.RUNNING], S.SUCCEEDED)
def succeed(*, execution_id: Any, lease_token: int, now: datetime, result: Any) -> bool:
    """RUNNING → SUCCEEDED with the handler's result, under the lease it ran with."""
    return _move(
        execution_id=execution_id,
        source=S.RUNNING,
        target=S.SUCCEEDED,
        now=now,
        lease_token=lease_token,
        message="succeeded",
        finished_at=now,
        result=storable_json(result),
    )


@moves([S.RUNNING], S.SUCCEEDED)
def succeed_without_result(*, success: Success, why: str) -> bool:
    """RUNNING → SUCCEEDED for a run whose result cannot be stored: its handler did its work, and
    a retry would do it again. The result is replaced by an error that says why."""
    return _move(
        execution_id=success.execution_id,
        source=S.RUNNING,
        target=S.SUCCEEDED,
        now=success.finished_at,
        lease_token=success.lease_token,
        message=f"succeeded; {why}",
        finished_at=success.finished_at,
        result=None,
        error=storable_text(why),
    )


@moves([S.RUNNING], S.SUCCEEDED)
def succeed_many(successes: Sequence[Success], *, now: datetime) -> set[str]:
    """RUNNING → SUCCEEDED for each run still under its lease token, in one statement where the
    database allows (and so one commit). Returns the ids recorded; a run whose lease moved on is
    left as it is."""
    if not successes:
        return set()
    if all(success.run_id is None for success in successes):
        # One statement that is its own transaction: most of what an outcome costs is its commit.
        changes = store().succeed_many(successes, now=now, result_of=lambda success: storable_json(success.result))
    else:
        with transaction.atomic():
            changes = store().succeed_many(successes, now=now, result_of=lambda s: storable_json(s.result))
            recorded = {str(change[0]) for change in changes if change[3] == S.SUCCEEDED}
            ran = {success.run_id for success in successes if success.run_id and str(success.execution_id) in recorded}
            steps.settle_runs(ran, now=now)
    observers.announce(changes)
    return {str(change[0]) for change in changes}


@moves([S.RUNNING], S.FAILED)
def fail(*, execution_id: Any, lease_token: int, now: datetime, error: str, traceback: str) -> bool:
    """RUNNING → FAILED: the handler raised. The retry policy must resolve it in the same
    transaction (scheduling.failures.execution_settle_failure)."""
    return _fail(S.FAILED, execution_id, lease_token, now, error, traceback)


@moves([S.RUNNING], S.TIMED_OUT)
def time_out(*, execution_id: Any, lease_token: int, now: datetime, error: str) -> bool:
    """RUNNING → TIMED_OUT: its worker stopped it at its timeout. Resolved like a failure."""
    return _fail(S.TIMED_OUT, execution_id, lease_token, now, error, "")


def _fail(target: ExecutionState, execution_id: Any, lease_token: int, now: datetime, error: str, trace: str) -> bool:
    error = storable_text(error)
    return _move(
        execution_id=execution_id,
        source=S.RUNNING,
        target=target,
        now=now,
        lease_token=lease_token,
        message=error[:500],
        finished_at=now,
        error=error,
        error_fingerprint=fingerprint(error),
        traceback=storable_text(trace),
    )


@moves([S.RUNNING], S.CANCELLED)
def cancel_running(*, execution_id: Any, lease_token: int, now: datetime, reason: str) -> bool:
    """RUNNING → CANCELLED by the worker that holds `lease_token`: it stopped the handler as asked."""
    return _move(
        execution_id=execution_id,
        source=S.RUNNING,
        target=S.CANCELLED,
        now=now,
        lease_token=lease_token,
        message=reason,
        finished_at=now,
    )


@moves([S.RUNNING], S.PENDING)
def release(*, execution_id: Any, lease_token: int, now: datetime, reason: str) -> bool:
    """RUNNING → PENDING by the worker holding `lease_token`, which is shutting down and stopped
    the handler short: the same attempt (no attempt is spent), due now, and the dispatchers
    woken. A late outcome of this delivery cannot land (every outcome is conditional on RUNNING
    and its lease token), and the next claim takes a new lease token."""
    moved = _move(
        execution_id=execution_id,
        source=S.RUNNING,
        target=S.PENDING,
        now=now,
        lease_token=lease_token,
        message=reason,
        available_at=now,
        lease_expires_at=None,
        timeout_at=None,
        started_at=None,
        heartbeat_at=None,
    )
    if moved:
        store().notify_due(now)
    return moved


# --- the retry policy's verdict --------------------------------------------------------------------------


@moves(sorted(RETRYABLE), S.PENDING)
def retry(*, execution_id: Any, source: ExecutionState, now: datetime, available_at: datetime, message: str) -> bool:
    """A failure → PENDING as the next attempt, due at `available_at` (after the backoff)."""
    accepts("retry", source)
    moved = _move(
        execution_id=execution_id,
        source=source,
        target=S.PENDING,
        now=now,
        message=message,
        attempt=F("attempt") + 1,
        available_at=available_at,
        **FRESH_ATTEMPT,
    )
    if moved:
        store().notify_due(available_at)
    return moved


@moves(sorted(RETRYABLE), S.DEAD)
def discard(*, execution_id: Any, source: ExecutionState, now: datetime, message: str) -> bool:
    """A failure → DEAD: attempts exhausted. The dead-letter view lists it. In the same transaction its
    job counts a failed fire, and is paused when that reaches its pauseAfterFailures (README)."""
    accepts("discard", source)
    with transaction.atomic():
        moved = _move(
            execution_id=execution_id, source=source, target=S.DEAD, now=now, message=message, finished_at=now
        )
        counted = store().count_failed_fire(execution_id=execution_id) if moved else None
        if counted is not None and counted.failed_fires >= counted.threshold:
            job_transitions.auto_pause(job_id=counted.job_id, now=now)
    return moved


# --- people and services (API, admin, dashboard) ---------------------------------------------------------


@moves([S.BLOCKED, S.PENDING, S.QUEUED], S.CANCELLED)
def cancel(*, execution_id: Any, now: datetime, reason: str) -> bool:
    """BLOCKED, PENDING or QUEUED → CANCELLED: it had not started, and will not."""
    for source in (S.PENDING, S.QUEUED, S.BLOCKED):
        if _move(
            execution_id=execution_id,
            source=source,
            target=S.CANCELLED,
            now=now,
            message=reason,
            finished_at=now,
            cancel_requested_at=now,
            lease_expires_at=None,
            republish_at=None,
        ):
            return True
    return False


def request_cancel(*, execution_id: Any, now: datetime, reason: str) -> bool:
    """RUNNING, not yet asked: record a durable cancel request (no move) that the worker reads
    with its next heartbeat and the sweeper enforces after a grace. The worker process running it
    is told at commit (`notify_cancel`), so that it beats at once instead of up to lease/3 later.
    False when it is not RUNNING or was asked already."""
    requested = store().request_cancel(
        execution_id=execution_id, now=now, message=storable_text(f"cancel requested: {reason}")
    )
    return requested


@moves(sorted(REDRIVABLE), S.PENDING)
def redrive(*, execution_id: Any, source: ExecutionState, now: datetime, reason: str) -> bool:
    """DEAD, FAILED or CANCELLED → PENDING: run it again, now, as its next attempt."""
    accepts("redrive", source)
    # The end it had still counts in the metrics, and its new attempt is not a retry (tallies.py).
    with tallies.folding(Execution.objects.filter(pk=execution_id, state=source)):
        moved = _move(
            execution_id=execution_id,
            source=source,
            target=S.PENDING,
            now=now,
            message=reason,
            attempt=F("attempt") + 1,
            available_at=now,
            error="",
            error_fingerprint="",
            traceback="",
            **FRESH_ATTEMPT,
        )
    if moved:
        store().notify_due(now)
    return moved


@moves([S.DEAD], S.DISCARDED)
def discard_dead_many(execution_ids: Sequence[Any], *, now: datetime, reason: str) -> list[Moved]:
    """DEAD → DISCARDED for those of `execution_ids` still DEAD, in one statement: they leave the
    dead letter for good. The metrics keep counting each as the DEAD end it had (its tally is
    folded), so discarding changes no counter."""
    if not execution_ids:
        return []
    with tallies.folding(Execution.objects.filter(pk__in=execution_ids, state=S.DEAD)):
        moved, changes = store().discard_dead(execution_ids, now=now, message=storable_text(reason))
    observers.announce(changes)
    return moved


# --- the sweeper -----------------------------------------------------------------------------------------


def _swept(target: ExecutionState, now: datetime, sweep: Callable[[], MovedSet]) -> list[Moved]:
    """A sweeper's batch of RUNNING runs moved to `target` by `sweep` (one of the store's moves);
    the workflow steps among them that ended settle their runs in the same transaction."""
    with transaction.atomic():
        moved, changes = sweep()
        if target in TERMINAL:
            steps.settle_runs_of([m.id for m in moved], now=now)
    observers.announce(changes)
    return moved


@moves([S.RUNNING], S.FAILED_WORKER_LOST)
def rescue_many(*, now: datetime, limit: int) -> list[Moved]:
    """RUNNING whose lease expired without a heartbeat → FAILED_WORKER_LOST (the worker died or
    froze). A run with a cancel request is left to `force_cancel_many`: it is never retried.
    The retry policy must resolve each in the same transaction."""
    error = "worker lost: lease expired without a heartbeat"
    return _swept(
        S.FAILED_WORKER_LOST,
        now,
        lambda: store().rescue_lost(now=now, limit=limit, error=error, error_fingerprint=fingerprint(error)),
    )


@moves([S.RUNNING], S.TIMED_OUT)
def time_out_many(*, now: datetime, before: datetime, limit: int) -> list[Moved]:
    """RUNNING whose timeout passed before `before` (its worker's grace to stop it is over) →
    TIMED_OUT. A run with a cancel request is left to `force_cancel_many`. The retry policy must
    resolve each in the same transaction."""
    error = "timed out (enforced by the sweeper)"
    return _swept(
        S.TIMED_OUT,
        now,
        lambda: store().time_out_overdue(
            now=now, before=before, limit=limit, error=error, error_fingerprint=fingerprint(error)
        ),
    )


@moves([S.RUNNING], S.CANCELLED)
def force_cancel_many(*, now: datetime, requested_before: datetime, limit: int) -> list[Moved]:
    """RUNNING with a cancel request that its worker did not act on: made before
    `requested_before`, or whose lease expired (the worker is gone) → CANCELLED, not a failure:
    what was asked to stop must not be retried."""
    message = "cancelled (enforced by the sweeper: the worker did not stop it in time, or was lost)"
    return _swept(
        S.CANCELLED,
        now,
        lambda: store().force_cancel(now=now, requested_before=requested_before, limit=limit, message=message),
    )


def republish_many(*, now: datetime, grace_seconds: float, limit: int) -> list[Republished]:
    """QUEUED and not started by `republish_at` → published again (no move: an event QUEUED →
    QUEUED). The next grace doubles, so a pool that is merely backlogged is not flooded with
    copies (duplicates are dropped by the lease). Call inside the transaction that publishes
    after commit."""
    return store().republish_stalled(now=now, grace_seconds=grace_seconds, limit=limit)


def prune_many(*, before: datetime, limit: int) -> tuple[int, set[Any]]:
    """Delete up to `limit` executions (and their events, or leave those to their partition's drop:
    executions/history_partitions.py) that finished before `before`. What they counted is folded
    into the metrics' totals in the same transaction (executions/tallies.py); rows another sweeper
    is pruning are skipped, so none is folded twice. Returns how many, and their jobs (a one-off
    among them with nothing left is pruned with them: retention's caller holds both in one
    transaction, scheduling.pruning.jobs_prune)."""
    with transaction.atomic():
        ids = store().lock_finished(before=before, limit=limit)
        jobs: set[Any] = set()
        if ids:
            pruned = Execution.objects.filter(pk__in=ids)
            jobs = set(pruned.values_list("job_id", flat=True))
            # Their events stay where the history is partitioned: their day's partition goes whole.
            with tallies.folding(pruned), history_left_to_partitions(store().history_partitioned):
                pruned.delete()
    return len(ids), jobs
