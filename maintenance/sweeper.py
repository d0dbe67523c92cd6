"""The sweeper: take back what crashed, stalled or overstayed, prune history (executions,
ended jobs, events, forgotten workers), and record each pool's minute as it ends (the
dashboard's charts of hours and days: maintenance/pool_history.py).

`run_once` is one unit of work and returns counts; each of its steps is one named, set-based,
batch-limited transition (SKIP LOCKED on PostgreSQL, so any number of sweepers can run). `serve`
is the loop the `run_sweeper` command runs.
"""

import logging
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Self

from django.conf import settings as django_settings
from django.db import close_old_connections, transaction

from background.loop import StopFlag, run_forever
from background.publisher import Dispatch, Publisher
from events.services import events_prune
from executions import transitions
from executions.clock import db_now
from executions.states import ExecutionState
from maintenance import pool_history
from pools import registry, roles
from pools.models import Role
from pools.roles import RoleBeat
from scheduling.failures import execution_settle_failure
from scheduling.pruning import jobs_prune, runs_prune
from telemetry import tracing

logger = logging.getLogger(__name__)
S = ExecutionState
# A worker not seen for this long (stopped, or gone) leaves the registry: the operator has seen it.
WORKER_RETENTION = timedelta(days=1)


@dataclass(frozen=True)
class SweeperSettings:
    batch: int  # rows per step and unit of work
    interval: float  # seconds between units of work when one was not full
    cancel_grace: timedelta  # what a worker has to stop a run itself
    publish_grace: float  # seconds a queued run may wait before it is published again (doubling)
    retention: timedelta  # how long finished executions are kept

    @classmethod
    def from_django(cls) -> Self:
        s = django_settings
        return cls(
            batch=500,
            interval=s.TICKWORK_SWEEP_SECONDS,
            cancel_grace=timedelta(seconds=s.TICKWORK_CANCEL_GRACE_SECONDS),
            publish_grace=s.TICKWORK_PUBLISH_GRACE_SECONDS,
            retention=timedelta(days=s.TICKWORK_RETENTION_DAYS),
        )


@dataclass
class SweepResult:
    lost: int = 0
    timed_out: int = 0
    force_cancelled: int = 0
    republished: int = 0
    pruned: int = 0
    jobs_pruned: int = 0
    runs_pruned: int = 0
    workers_forgotten: int = 0
    events_pruned: int = 0

    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))


def reclaim_lost(*, now: datetime, limit: int) -> int:
    """RUNNING whose lease expired without a heartbeat → FAILED_WORKER_LOST → retry policy."""
    with transaction.atomic():
        moved = transitions.rescue_many(now=now, limit=limit)
        for m in moved:
            execution_settle_failure(execution_id=m.id, failed_state=S.FAILED_WORKER_LOST, now=now)
        tracing.swept(moved, action="worker_lost", error=True)
    return len(moved)


def time_out(*, now: datetime, limit: int, cancel_grace: timedelta) -> int:
    """RUNNING past its timeout plus the grace the worker had to stop it itself → TIMED_OUT
    (and the retry policy)."""
    with transaction.atomic():
        moved = transitions.time_out_many(now=now, before=now - cancel_grace, limit=limit)
        for m in moved:
            execution_settle_failure(execution_id=m.id, failed_state=S.TIMED_OUT, now=now)
        tracing.swept(moved, action="timed_out", error=True)
    return len(moved)


def force_cancel(*, now: datetime, limit: int, cancel_grace: timedelta) -> int:
    """RUNNING with a cancel request that its worker did not act on within two graces, or whose
    worker is gone → CANCELLED."""
    with transaction.atomic():
        moved = transitions.force_cancel_many(now=now, requested_before=now - 2 * cancel_grace, limit=limit)
        tracing.swept(moved, action="force_cancelled", error=False)
    return len(moved)


def republish(*, now: datetime, limit: int, publisher: Publisher, publish_grace: float) -> int:
    """QUEUED and not started in time → published again, after commit."""
    with transaction.atomic():
        stalled = transitions.republish_many(now=now, grace_seconds=publish_grace, limit=limit)
        if stalled:
            dispatches = [
                Dispatch(execution_id=str(e.id), lease_token=e.lease_token, pool=e.pool, priority=e.priority)
                for e in stalled
            ]
            transaction.on_commit(lambda: publisher.publish(dispatches))
    return len(stalled)


def run_once(*, now: datetime, publisher: Publisher, config: SweeperSettings | None = None) -> SweepResult:
    config = config or SweeperSettings.from_django()
    limit = config.batch
    result = SweepResult(
        lost=reclaim_lost(now=now, limit=limit),
        timed_out=time_out(now=now, limit=limit, cancel_grace=config.cancel_grace),
        force_cancelled=force_cancel(now=now, limit=limit, cancel_grace=config.cancel_grace),
        republished=republish(now=now, limit=limit, publisher=publisher, publish_grace=config.publish_grace),
        pruned=transitions.prune_many(before=now - config.retention, limit=limit),
        runs_pruned=runs_prune(before=now - config.retention, limit=limit),
        jobs_pruned=jobs_prune(before=now - config.retention, limit=limit),
        workers_forgotten=registry.prune(now=now, older_than=WORKER_RETENTION)
        + roles.prune(now=now, older_than=WORKER_RETENTION),
        # Never sooner than events' idempotency keys last, whatever the retention (events_prune).
        events_pruned=events_prune(now=now, retention=config.retention, limit=limit),
    )
    if result.total():
        logger.info("sweep: %s", result)
    return result


def record_history(*, now: datetime) -> int:
    """The pools' minute that ended last, if no sweeper recorded it yet, and the pruning of the
    minutes past their keep (maintenance/pool_history.py). Apart from `run_once`: it is
    bookkeeping of the minute, not work to take back, and never a reason to sweep again at once."""
    return pool_history.record(now=now) + pool_history.prune(now=now)


def serve(*, stop: StopFlag, publisher: Publisher, config: SweeperSettings | None = None) -> None:
    """Sweep until `stop`: at once again after a full unit of work, else every `interval`."""
    config = config or SweeperSettings.from_django()

    def step() -> float:
        close_old_connections()
        now = db_now()
        result = run_once(now=now, publisher=publisher, config=config)
        record_history(now=now)
        return 0 if result.total() >= config.batch else config.interval

    run_forever(name="sweeper", step=step, stop=stop, beat=RoleBeat(Role.Kind.SWEEPER, clock=db_now))
