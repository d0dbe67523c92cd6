"""In-process steps for the fast tests: what a worker does to a row, with `now` injected."""

from datetime import datetime, timedelta

from django.test import TestCase

from background.publisher import Dispatch, InMemoryPublisher
from dispatcher import dispatcher
from dispatcher.dispatcher import DispatchResult
from executions import transitions
from executions.models import Execution


def dispatch(now: datetime, *, limit: int | None = None) -> tuple[DispatchResult, list[Dispatch]]:
    """One dispatcher.run_once at `now`: its counts and what it published. Its publish runs on commit,
    which inside a test's transaction would be never: run it when it returns."""
    publisher = InMemoryPublisher()
    with TestCase.captureOnCommitCallbacks(execute=True):
        result = dispatcher.run_once(now=now, publisher=publisher, limit=limit)
    return result, publisher.sent


def claim(now: datetime, *, limit: int | None = None) -> list[Dispatch]:
    """One dispatcher.run_once at `now`; returns what it published."""
    return dispatch(now, limit=limit)[1]


def start(execution_id, *, now: datetime, lease: float = 30, worker: str = "host:1") -> Execution:
    """QUEUED → RUNNING as runner.run does it (`transitions.start`), under the row's lease token."""
    row = Execution.objects.get(pk=execution_id)
    started = transitions.start(
        execution_id=execution_id,
        lease_token=row.lease_token,
        now=now,
        worker_id=worker,
        lease=timedelta(seconds=lease),
    )
    assert started, f"{execution_id} did not start"
    return Execution.objects.get(pk=execution_id)


def succeed(execution_id, *, now: datetime) -> None:
    row = Execution.objects.get(pk=execution_id)
    assert transitions.succeed(execution_id=execution_id, lease_token=row.lease_token, now=now, result=None)
