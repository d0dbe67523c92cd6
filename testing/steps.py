"""In-process steps for the fast tests: what a worker does to a row, with `now` injected."""

from datetime import datetime, timedelta

from django.test import TestCase

from background.publisher import Dispatch, InMemoryPublisher
from dispatcher.dispatcher import DispatchResult, dispatch_once
from executions.models import Execution
from executions.states import ExecutionState as S
from executions.states import transition


def dispatch(now: datetime, *, limit: int | None = None) -> tuple[DispatchResult, list[Dispatch]]:
    """One dispatch_once at `now`: its counts and what it published. Its publish runs on commit,
    which inside a test's transaction would be never: run it when dispatch_once returns."""
    publisher = InMemoryPublisher()
    with TestCase.captureOnCommitCallbacks(execute=True):
        result = dispatch_once(now=now, publisher=publisher, limit=limit)
    return result, publisher.sent


def claim(now: datetime, *, limit: int | None = None) -> list[Dispatch]:
    """One dispatch_once at `now`; returns what it published."""
    return dispatch(now, limit=limit)[1]


def start(execution_id, *, now: datetime, lease: float = 30, worker: str = "host:1") -> Execution:
    """QUEUED → RUNNING as runner.run does it, under the row's current lease token."""
    row = Execution.objects.select_related("job").get(pk=execution_id)
    moved = transition(
        execution_id=execution_id,
        source=S.QUEUED,
        target=S.RUNNING,
        now=now,
        lease_token=row.lease_token,
        message="started",
        started_at=now,
        heartbeat_at=now,
        worker_id=worker,
        republish_at=None,
        lease_expires_at=now + timedelta(seconds=lease),
        timeout_at=now + timedelta(seconds=row.job.timeout_sec),
    )
    assert moved, f"{execution_id} did not start"
    return Execution.objects.get(pk=execution_id)


def succeed(execution_id, *, now: datetime) -> None:
    row = Execution.objects.get(pk=execution_id)
    assert transition(
        execution_id=execution_id,
        source=S.RUNNING,
        target=S.SUCCEEDED,
        now=now,
        lease_token=row.lease_token,
        message="succeeded",
        finished_at=now,
    )
