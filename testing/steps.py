"""In-process steps for the fast tests: what a worker does to a row, with `now` injected."""

from datetime import datetime, timedelta

from django.test import TestCase

from background.publisher import Dispatch, InMemoryPublisher, Publisher
from background.service import Pass
from dispatcher import dispatcher
from dispatcher.dispatcher import DispatchResult
from executions import transitions
from executions.models import Execution
from jobs import registry
from maintenance import registry as services
from maintenance import roles
from pools.models import Worker

IN_PROCESS_WORKER = "in-process"


def capacity(now: datetime, *, slots: int = 10_000, pools: list[str] | None = None) -> Worker:
    """A worker registered as live at `now`, serving `pools` (every known pool) with `slots`
    slots: admission then lets through everything due, as these tests expect of a claim. The
    tests of admission itself register what they need."""
    worker, _ = Worker.objects.update_or_create(
        hostname=IN_PROCESS_WORKER,
        pid=0,
        defaults={
            "pools": pools or registry.pools(),
            "slots": slots,
            "started_at": now,
            "last_seen_at": now,
            "stopped_at": None,
        },
    )
    return worker


def dispatch(
    now: datetime, *, limit: int | None = None, slots: int | None = 10_000
) -> tuple[DispatchResult, list[Dispatch]]:
    """One dispatcher.run_once at `now`: its counts and what it published. Its publish runs on commit,
    which inside a test's transaction would be never: run it when it returns. With `slots`, an
    in-process worker of that many slots is registered first (None: the registry as it is)."""
    if slots is not None:
        capacity(now, slots=slots)
    publisher = InMemoryPublisher()
    with TestCase.captureOnCommitCallbacks(execute=True):
        result = dispatcher.run_once(now=now, publisher=publisher, limit=limit)
    return result, publisher.sent


def claim(now: datetime, *, limit: int | None = None, slots: int | None = 10_000) -> list[Dispatch]:
    """One dispatcher.run_once at `now`; returns what it published."""
    return dispatch(now, limit=limit, slots=slots)[1]


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


def sweeper_pass(now: datetime, *, publisher: Publisher | None = None) -> Pass:
    """One pass of the sweeper's services (maintenance/registry.py) at `now`: each one's counts."""
    return roles.run_once(services.SWEEPER, now=now, publisher=publisher or InMemoryPublisher())


def alerter_pass(now: datetime) -> Pass:
    """One pass of the alerter's services at `now`: evaluation, then delivery."""
    return roles.run_once(services.ALERTER, now=now, publisher=InMemoryPublisher())
