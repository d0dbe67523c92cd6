"""The execution timeline as GET /v1/executions/{id} serves it (`events`), field for field, for
the paths an execution can take: a plain run, a cancel before the start and one while running, a
worker's release on shutdown, and one execution that was retried, reclaimed (its lease lost and
rescued by the sweeper) and re-driven from the dead letter. The expected values were captured on
the code that wrote every event as a row (before issue 36), so whatever the history is made of
now (rows, or the execution's own columns: executions/history.py), the API says what it said.
Times are offsets in seconds from the execution's first event; each move is made at a known time."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import transitions
from executions.models import Execution
from executions.states import ExecutionState as S
from maintenance.services.lost_leases import LostLeases
from scheduling.execution_changes import execution_cancel, execution_redrive
from scheduling.failures import execution_settle_failure
from web.tests.test_api_executions import parse

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

LEASE = timedelta(seconds=30)


def timeline(api, execution_id) -> list[tuple]:
    """The API's events, each (offset, from, to, attempt, worker, message), in the order served."""
    response = api.get(f"/v1/executions/{execution_id}")
    assert response.status_code == 200
    events = response.json()["events"]
    assert all(e.keys() == {"time", "from", "to", "attempt", "worker", "message"} for e in events)
    first = parse(events[0]["time"])
    return [
        ((parse(e["time"]) - first).total_seconds(), e["from"], e["to"], e["attempt"], e["worker"], e["message"])
        for e in events
    ]


@pytest.fixture
def at():
    """at(seconds): a moment that many seconds after the test's first, whole seconds apart."""
    base = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    return lambda seconds: base + timedelta(seconds=seconds)


def _queue(execution_id, now) -> int:
    (moved,) = transitions.queue_many([execution_id], now=now, publish_grace=timedelta(seconds=30))
    return moved.lease_token


def _start(execution_id, token, now, worker) -> None:
    assert transitions.start(execution_id=execution_id, lease_token=token, now=now, worker_id=worker, lease=LEASE)


def _made(make_job, tenant, at, **fields) -> Execution:
    return make_job(tenant, now=at(0), run_at=at(0), **fields).executions.get()


def test_a_plain_run(api, tenant, make_job, at):
    """Made, queued, started, succeeded: four events."""
    execution = _made(make_job, tenant, at)
    token = _queue(execution.pk, at(1))
    _start(execution.pk, token, at(2), "w-1")
    assert transitions.succeed(execution_id=execution.pk, lease_token=token, now=at(3), result={"ok": True})

    assert timeline(api, execution.pk) == [
        (0.0, None, "PENDING", 1, "", "scheduled"),
        (1.0, "PENDING", "QUEUED", 1, "", ""),
        (2.0, "QUEUED", "RUNNING", 1, "w-1", "started"),
        (3.0, "RUNNING", "SUCCEEDED", 1, "w-1", "succeeded"),
    ]


def test_a_run_recorded_with_a_workers_batch_of_outcomes(api, tenant, make_job, at):
    """The worker's batched successes (succeed_many) record the same history, each at its finish."""
    from store import Success

    execution = _made(make_job, tenant, at)
    token = _queue(execution.pk, at(1))
    _start(execution.pk, token, at(2), "w-1")
    assert transitions.succeed_many([Success(execution.pk, token, 1, at(3))], now=at(4)) == {str(execution.pk)}

    assert timeline(api, execution.pk) == [
        (0.0, None, "PENDING", 1, "", "scheduled"),
        (1.0, "PENDING", "QUEUED", 1, "", ""),
        (2.0, "QUEUED", "RUNNING", 1, "w-1", "started"),
        (3.0, "RUNNING", "SUCCEEDED", 1, "w-1", "succeeded"),
    ]


def test_a_run_whose_result_could_not_be_stored(api, tenant, make_job, at):
    """A success without its result says why in its last event's message."""
    from store import Success

    execution = _made(make_job, tenant, at)
    token = _queue(execution.pk, at(1))
    _start(execution.pk, token, at(2), "w-1")
    success = Success(execution.pk, token, None, at(3), None)
    assert transitions.succeed_without_result(success=success, why="result too large")

    assert timeline(api, execution.pk) == [
        (0.0, None, "PENDING", 1, "", "scheduled"),
        (1.0, "PENDING", "QUEUED", 1, "", ""),
        (2.0, "QUEUED", "RUNNING", 1, "w-1", "started"),
        (3.0, "RUNNING", "SUCCEEDED", 1, "w-1", "succeeded; result too large"),
    ]


def test_cancelled_before_its_start_and_while_running(api, tenant, make_job, at):
    """A cancel of a queued execution ends it at once; one of a running execution is a request
    (RUNNING → RUNNING) that its worker then acts on."""
    queued = _made(make_job, tenant, at)
    _queue(queued.pk, at(1))
    assert execution_cancel(execution=queued, now=at(2)) == S.CANCELLED

    running = _made(make_job, tenant, at)
    token = _queue(running.pk, at(1))
    _start(running.pk, token, at(2), "w-1")
    assert execution_cancel(execution=running, now=at(3), reason="not needed") == S.RUNNING
    assert transitions.cancel_running(execution_id=running.pk, lease_token=token, now=at(4), reason="stopped")

    assert timeline(api, queued.pk) == [
        (0.0, None, "PENDING", 1, "", "scheduled"),
        (1.0, "PENDING", "QUEUED", 1, "", ""),
        (2.0, "QUEUED", "CANCELLED", 1, "", "cancelled"),
    ]
    assert timeline(api, running.pk) == [
        (0.0, None, "PENDING", 1, "", "scheduled"),
        (1.0, "PENDING", "QUEUED", 1, "", ""),
        (2.0, "QUEUED", "RUNNING", 1, "w-1", "started"),
        (3.0, "RUNNING", "RUNNING", 1, "w-1", "cancel requested: not needed"),
        (4.0, "RUNNING", "CANCELLED", 1, "w-1", "stopped"),
    ]


def test_released_by_a_worker_that_shut_down_then_run_again(api, tenant, make_job, at):
    """A release puts the same attempt back (no attempt spent); the next worker runs it."""
    execution = _made(make_job, tenant, at)
    token = _queue(execution.pk, at(1))
    _start(execution.pk, token, at(2), "w-1")
    assert transitions.release(execution_id=execution.pk, lease_token=token, now=at(3), reason="worker shutting down")
    token = _queue(execution.pk, at(4))
    _start(execution.pk, token, at(5), "w-2")
    assert transitions.succeed(execution_id=execution.pk, lease_token=token, now=at(6), result=None)

    assert timeline(api, execution.pk) == [
        (0.0, None, "PENDING", 1, "", "scheduled"),
        (1.0, "PENDING", "QUEUED", 1, "", ""),
        (2.0, "QUEUED", "RUNNING", 1, "w-1", "started"),
        (3.0, "RUNNING", "PENDING", 1, "w-1", "worker shutting down"),
        (4.0, "PENDING", "QUEUED", 1, "w-1", ""),
        (5.0, "QUEUED", "RUNNING", 1, "w-2", "started"),
        (6.0, "RUNNING", "SUCCEEDED", 1, "w-2", "succeeded"),
    ]


def test_retried_reclaimed_and_re_driven(api, tenant, make_job, at):
    """Attempt 1 fails and is retried; attempt 2's worker is lost and the sweeper rescues it into
    a retry; attempt 3 fails for good (DEAD); a re-drive from the dead letter runs attempt 4."""
    execution = _made(
        make_job, tenant, at, max_attempts=3, backoff="FIXED", initial_delay_ms=5000, max_delay_ms=5000, jitter=False
    )
    pk = execution.pk
    # Attempt 1: the handler raises; the policy retries it 5 s later.
    token = _queue(pk, at(1))
    _start(pk, token, at(2), "w-1")
    assert transitions.fail(execution_id=pk, lease_token=token, now=at(3), error="boom", traceback="tb")
    assert execution_settle_failure(execution_id=pk, failed_state=S.FAILED, now=at(3)) == S.PENDING
    # Attempt 2: its worker vanishes; the sweeper finds the lease expired.
    token = _queue(pk, at(8))
    _start(pk, token, at(9), "w-2")
    assert LostLeases().run_once(now=at(9) + LEASE + timedelta(seconds=1)).lost == 1
    # Attempt 3: fails again, and attempts are exhausted.
    token = _queue(pk, at(45))
    _start(pk, token, at(46), "w-3")
    assert transitions.fail(execution_id=pk, lease_token=token, now=at(47), error="boom again", traceback="")
    assert execution_settle_failure(execution_id=pk, failed_state=S.FAILED, now=at(47)) == S.DEAD
    # Re-driven from the dead letter: attempt 4 succeeds.
    execution_redrive(execution=Execution.objects.get(pk=pk), now=at(60))
    token = _queue(pk, at(61))
    _start(pk, token, at(62), "w-4")
    assert transitions.succeed(execution_id=pk, lease_token=token, now=at(63), result=4)

    retry_2 = at(8).isoformat()
    retry_3 = at(45).isoformat()
    assert timeline(api, pk) == [
        (0.0, None, "PENDING", 1, "", "scheduled"),
        (1.0, "PENDING", "QUEUED", 1, "", ""),
        (2.0, "QUEUED", "RUNNING", 1, "w-1", "started"),
        (3.0, "RUNNING", "FAILED", 1, "w-1", "boom"),
        (3.0, "FAILED", "PENDING", 2, "", f"retry 2 of 3 at {retry_2}"),
        (8.0, "PENDING", "QUEUED", 2, "", ""),
        (9.0, "QUEUED", "RUNNING", 2, "w-2", "started"),
        (40.0, "RUNNING", "FAILED_WORKER_LOST", 2, "w-2", "worker lost: lease expired without a heartbeat"),
        (40.0, "FAILED_WORKER_LOST", "PENDING", 3, "", f"retry 3 of 3 at {retry_3}"),
        (45.0, "PENDING", "QUEUED", 3, "", ""),
        (46.0, "QUEUED", "RUNNING", 3, "w-3", "started"),
        (47.0, "RUNNING", "FAILED", 3, "w-3", "boom again"),
        (47.0, "FAILED", "DEAD", 3, "w-3", "attempts exhausted (3 of 3)"),
        (60.0, "DEAD", "PENDING", 4, "", "re-driven"),
        (61.0, "PENDING", "QUEUED", 4, "", ""),
        (62.0, "QUEUED", "RUNNING", 4, "w-4", "started"),
        (63.0, "RUNNING", "SUCCEEDED", 4, "w-4", "succeeded"),
    ]
