"""A worker process that is shutting down releases its runs (issue #10, defect 8): the real runner,
in-process; the end-to-end tests send real workers SIGTERM."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from executions.models import Execution
from executions.states import TRANSITIONS
from executions.states import ExecutionState as S
from testing.steps import claim
from worker import heartbeats as process_heartbeats
from worker import runner

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_heartbeats():
    if connection.vendor != "postgresql":
        pytest.skip("a run on a second thread needs a database both threads see (the standalone test covers SQLite)")
    yield
    # This test process goes on: it was not really shutting down.
    heartbeats = process_heartbeats.Heartbeats.current()
    process_heartbeats._shutdown_grace = None
    if heartbeats is not None:
        heartbeats.shutdown_grace = None


def _running(tenant, make_job, **job):
    make_job(tenant, run_at=timezone.now() - timedelta(seconds=1), **job)
    (sent,) = claim(timezone.now())
    outcome = []

    def work() -> None:
        outcome.append(runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token))
        connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()
    deadline = timezone.now() + timedelta(seconds=10)
    while not Execution.objects.filter(pk=sent.execution_id, state=S.RUNNING).exists():
        assert timezone.now() < deadline, "the run did not start"
    return sent, thread, outcome


def test_defect8_release_is_a_transition_of_the_state_machine():
    assert S.PENDING in TRANSITIONS[S.RUNNING]


def test_defect8_a_run_stopped_by_shutdown_is_released_to_pending_at_once(tenant, make_job):
    """`sleep 60`; the process shuts down: the handler stops at once, and its run is PENDING
    again, same attempt, due now, with a "released" event; no attempt spent, no lease to expire."""
    sent, thread, outcome = _running(tenant, make_job, handler="sleep", payload={"seconds": 60})
    before = timezone.now()

    process_heartbeats.release_runs()
    thread.join(10)

    assert outcome == [S.PENDING]
    execution = Execution.objects.get(pk=sent.execution_id)
    assert (execution.state, execution.attempt, execution.lease_expires_at) == (S.PENDING, 1, None)
    assert execution.available_at >= before
    event = execution.events.order_by("id").last()
    assert (event.from_state, event.to_state, event.message) == (S.RUNNING, S.PENDING, "released: worker shutting down")


def test_defect8_a_cancel_requested_before_the_release_wins(tenant, make_job):
    """A run that was asked to cancel is cancelled, not released to run again."""
    sent, thread, outcome = _running(tenant, make_job, handler="sleep", payload={"seconds": 60})
    Execution.objects.filter(pk=sent.execution_id).update(cancel_requested_at=timezone.now())

    process_heartbeats.release_runs()
    thread.join(10)

    assert outcome == [S.PENDING]  # what the runner was asked to do; the row says what it did
    assert Execution.objects.get(pk=sent.execution_id).state == S.CANCELLED


def test_defect8_a_delivery_once_the_process_is_shutting_down_is_not_started(tenant, make_job):
    """A delivery that reaches a process once it is shutting down (the filesystem broker delivers
    during Celery's warm shutdown, also to a pool process forked after it began) is not started:
    the run stays QUEUED under its lease, for the sweeper to publish again, and nothing runs."""
    make_job(tenant, run_at=timezone.now() - timedelta(seconds=1), handler="sleep", payload={"seconds": 60})
    (sent,) = claim(timezone.now())
    process_heartbeats.release_runs()

    outcome = runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token)

    assert outcome is None
    execution = Execution.objects.get(pk=sent.execution_id)
    assert (execution.state, execution.lease_token, execution.started_at) == (S.QUEUED, sent.lease_token, None)
