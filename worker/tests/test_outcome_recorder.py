"""A worker's successes are recorded by a thread of the process (outcomes.OutcomeRecorder), so that
the worker slot moves on while the outcome commits. These tests run the real runner in-process on
PostgreSQL; the end-to-end tests exercise the same path in real worker processes."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

import testing.handlers_for_tests  # noqa: F401  (registers test-atomic-noop)
from executions.models import Execution
from store import Success
from testing import harness
from testing.steps import claim
from worker import outcomes, runner, tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("the recorder is used on PostgreSQL only")
    yield
    # The recorder's thread keeps its own connection open (as it should in a worker); the test
    # database can be dropped only once it is closed, which only that thread can do.
    outcomes.OutcomeRecorder.of_process().submit(connections.close_all)
    assert outcomes.flush_outcomes(timeout=10)


def _queued(tenant, make_job, **job):
    make_job(tenant, run_at=timezone.now() - timedelta(seconds=1), **job)
    (sent,) = claim(timezone.now())
    return sent


def test_a_deferred_success_is_recorded_by_the_recorder(tenant, make_job):
    sent = _queued(tenant, make_job)

    outcome = runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token, defer_success=True)

    assert outcome == "SUCCEEDED"
    assert outcomes.flush_outcomes(timeout=10)
    execution = Execution.objects.get(pk=sent.execution_id)
    assert execution.state == "SUCCEEDED" and execution.finished_at is not None
    assert execution.job.standing == "COMPLETED"
    assert [to for _, to in harness.history(execution.pk)] == ["PENDING", "QUEUED", "RUNNING", "SUCCEEDED"]


def test_a_deferred_success_after_the_lease_moved_on_is_discarded(tenant, make_job, caplog):
    """Fencing holds on the recorder's thread too: the outcome of a lease that was taken away
    (here, a cancel that ended the run meanwhile) is not written."""
    sent = _queued(tenant, make_job)
    recorder = outcomes.OutcomeRecorder.of_process()
    gate = threading.Event()
    recorder.submit(gate.wait)  # hold the recorder until the lease has moved on
    runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token, defer_success=True)
    Execution.objects.filter(pk=sent.execution_id).update(lease_token=sent.lease_token + 1)

    gate.set()
    assert outcomes.flush_outcomes(timeout=10)

    assert Execution.objects.get(pk=sent.execution_id).state == "RUNNING"
    assert "outcome discarded" in caplog.text


def test_flush_waits_for_what_is_queued_and_says_when_it_gave_up():
    recorder = outcomes.OutcomeRecorder.of_process()
    gate = threading.Event()
    recorder.submit(gate.wait)

    assert outcomes.flush_outcomes(timeout=0.2) is False

    gate.set()
    assert outcomes.flush_outcomes(timeout=10) is True


def test_a_failing_record_does_not_stop_the_recorder(caplog):
    recorder = outcomes.OutcomeRecorder.of_process()
    done = []

    def broken() -> None:
        raise RuntimeError("database went away")

    recorder.submit(broken)
    recorder.submit(lambda: done.append(True))

    assert outcomes.flush_outcomes(timeout=10)
    assert done == [True]
    assert "outcome not recorded" in caplog.text


def test_a_worker_process_that_ends_records_its_queued_outcomes_first(tenant, make_job):
    """Celery sends worker_process_shutdown in a prefork child that ends (max tasks per child,
    warm shutdown): the handler waits for the queue."""
    sent = _queued(tenant, make_job)
    recorder = outcomes.OutcomeRecorder.of_process()
    gate = threading.Event()
    recorder.submit(gate.wait)
    runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token, defer_success=True)
    threading.Timer(0.3, gate.set).start()

    tasks.record_queued_outcomes(pid=0, exitcode=0)

    assert Execution.objects.get(pk=sent.execution_id).state == "SUCCEEDED"


def test_an_atomic_handler_is_never_deferred(tenant, make_job):
    """Its writes commit with SUCCEEDED, so the run records synchronously even when asked to defer."""
    sent = _queued(tenant, make_job, handler="test-atomic-noop")
    recorder = outcomes.OutcomeRecorder.of_process()
    gate = threading.Event()
    recorder.submit(gate.wait)
    try:
        runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token, defer_success=True)
        assert Execution.objects.get(pk=sent.execution_id).state == "SUCCEEDED"
    finally:
        gate.set()


def test_successes_that_gather_are_recorded_together(tenant, make_job, monkeypatch):
    """While the recorder is busy, the successes that queue up are recorded as one batch: every
    run SUCCEEDED, its job COMPLETED; nothing of them was written before."""
    sent = [_queued(tenant, make_job) for _ in range(5)]
    ids = [s.execution_id for s in sent]
    recorder = outcomes.OutcomeRecorder.of_process()
    gate = threading.Event()
    recorder.submit(gate.wait)
    for each in sent:
        runner.run(execution_id=each.execution_id, lease_token=each.lease_token, defer_success=True)
    assert set(Execution.objects.filter(pk__in=ids).values_list("state", flat=True)) == {"RUNNING"}
    batches = []
    record = outcomes._record_successes
    monkeypatch.setattr(outcomes, "_record_successes", lambda batch: (batches.append(len(batch)), record(batch)))

    gate.set()
    assert outcomes.flush_outcomes(timeout=10)

    assert batches == [5]
    rows = Execution.objects.filter(pk__in=ids)
    assert {r.state for r in rows} == {"SUCCEEDED"} and {r.job.standing for r in rows} == {"COMPLETED"}


def test_a_workflow_steps_success_does_not_wait_the_linger(monkeypatch):
    """A step's success releases the steps after it, so it is recorded at once; any other success
    waits the linger for others to batch with."""
    recorded = []
    monkeypatch.setattr(outcomes, "_record_successes", lambda batch: recorded.append([s.run_id for s in batch]))
    monkeypatch.setattr(outcomes.OutcomeRecorder, "LINGER_SECONDS", 2.0)
    recorder = outcomes.OutcomeRecorder.of_process()
    now = timezone.now()

    def timed(run_id: str | None) -> float:
        started = time.monotonic()
        recorder.submit(Success("e", 1, None, now, run_id=run_id))
        assert outcomes.flush_outcomes(timeout=10)
        return time.monotonic() - started

    assert timed(run_id="r") < 1.5
    assert timed(run_id=None) >= 2.0
    assert recorded == [["r"], [None]]
