"""One unit of sweeper work: take back what crashed, stalled or overstayed, and prune history.

Each step is one set-based, batch-limited statement (SKIP LOCKED, so any number of sweepers can
run), and returns how many rows it moved.
"""

import logging
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from background.publisher import Dispatch, Publisher
from executions.models import Execution
from executions.services import execution_settle_failure
from executions.states import TERMINAL, ExecutionState, record_events, transition_set

logger = logging.getLogger(__name__)
S = ExecutionState


@dataclass
class SweepResult:
    lost: int = 0
    timed_out: int = 0
    force_cancelled: int = 0
    republished: int = 0
    pruned: int = 0

    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))


def _locked(condition: str, state: ExecutionState) -> str:
    lock = " FOR UPDATE SKIP LOCKED" if connection.vendor == "postgresql" else ""
    return f"id IN (SELECT id FROM executions_execution WHERE state = '{state.value}' AND {condition} LIMIT %s{lock})"


def _fail_running(
    *, target: ExecutionState, condition: str, params: list, now: datetime, message: str, limit: int
) -> int:
    with transaction.atomic():
        moved = transition_set(
            source=S.RUNNING,
            target=target,
            now=now,
            where=_locked(condition, S.RUNNING),
            params=[*params, limit],
            assignments="finished_at = %s, error = %s",
            assignment_params=[now, message],
            message=message,
        )
        for m in moved:
            execution_settle_failure(execution_id=m.id, failed_state=target, now=now)
    return len(moved)


def reclaim_lost(*, now: datetime, limit: int) -> int:
    """RUNNING whose lease expired without a heartbeat → FAILED_WORKER_LOST → retry policy.
    A run with a cancel request is left to `force_cancel`: a cancelled run is never retried."""
    return _fail_running(
        target=S.FAILED_WORKER_LOST,
        condition="lease_expires_at < %s AND cancel_requested_at IS NULL",
        params=[now],
        now=now,
        message="worker lost: lease expired without a heartbeat",
        limit=limit,
    )


def time_out(*, now: datetime, limit: int) -> int:
    """RUNNING past its timeout plus the grace the worker had to stop it itself → TIMED_OUT
    (and the retry policy). A run with a cancel request is left to `force_cancel`."""
    grace = timedelta(seconds=settings.TICKWORK_CANCEL_GRACE_SECONDS)
    return _fail_running(
        target=S.TIMED_OUT,
        condition="timeout_at < %s AND cancel_requested_at IS NULL",
        params=[now - grace],
        now=now,
        message="timed out (enforced by the sweeper)",
        limit=limit,
    )


def force_cancel(*, now: datetime, limit: int) -> int:
    """RUNNING with a cancel request that its worker did not act on: older than two graces, or
    whose lease expired (the worker is gone). CANCELLED, not FAILED_WORKER_LOST or TIMED_OUT:
    what was asked to stop must not be retried."""
    grace = timedelta(seconds=2 * settings.TICKWORK_CANCEL_GRACE_SECONDS)
    with transaction.atomic():
        moved = transition_set(
            source=S.RUNNING,
            target=S.CANCELLED,
            now=now,
            where=_locked(
                "cancel_requested_at IS NOT NULL AND (cancel_requested_at < %s OR lease_expires_at < %s)", S.RUNNING
            ),
            params=[now - grace, now, limit],
            assignments="finished_at = %s",
            assignment_params=[now],
            message="cancelled (enforced by the sweeper: the worker did not stop it in time, or was lost)",
        )
    return len(moved)


def republish(*, now: datetime, limit: int, publisher: Publisher) -> int:
    """QUEUED and not started by `republish_at` → publish again. The next grace doubles, so a pool
    that is merely backlogged is not flooded with copies (duplicates are dropped by the lease)."""
    grace = settings.TICKWORK_PUBLISH_GRACE_SECONDS
    with transaction.atomic():
        stalled = list(
            Execution.objects.select_for_update(skip_locked=True)
            .filter(state=S.QUEUED, republish_at__lt=now)
            .only("id", "lease_token", "pool", "priority", "attempt", "publish_count")[:limit]
        )
        for execution in stalled:
            backoff = grace * 2 ** min(execution.publish_count, 10)
            Execution.objects.filter(pk=execution.pk, state=S.QUEUED, lease_token=execution.lease_token).update(
                republish_at=now + timedelta(seconds=backoff), publish_count=F("publish_count") + 1, updated_at=now
            )
        if stalled:
            record_events(
                [(e.pk, e.attempt, "") for e in stalled],
                source=S.QUEUED,
                target=S.QUEUED,
                now=now,
                message="not started within the publish grace; published again",
            )
            dispatches = [
                Dispatch(execution_id=str(e.pk), lease_token=e.lease_token, pool=e.pool, priority=e.priority)
                for e in stalled
            ]
            transaction.on_commit(lambda: publisher.publish(dispatches))
    return len(stalled)


def prune(*, now: datetime, limit: int) -> int:
    """Delete finished executions (and their events) older than the retention period."""
    cutoff = now - timedelta(days=settings.TICKWORK_RETENTION_DAYS)
    ids = list(
        Execution.objects.filter(state__in=TERMINAL, finished_at__lt=cutoff).values_list("pk", flat=True)[:limit]
    )
    if ids:
        Execution.objects.filter(pk__in=ids).delete()
    return len(ids)


def sweep_once(*, now: datetime, publisher: Publisher, limit: int = 500) -> SweepResult:
    result = SweepResult(
        lost=reclaim_lost(now=now, limit=limit),
        timed_out=time_out(now=now, limit=limit),
        force_cancelled=force_cancel(now=now, limit=limit),
        republished=republish(now=now, limit=limit, publisher=publisher),
        pruned=prune(now=now, limit=limit),
    )
    if result.total():
        logger.info("sweep: %s", result)
    return result
