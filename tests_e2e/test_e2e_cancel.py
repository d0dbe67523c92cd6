"""Cancellation in every state, with real processes: before it runs, while it runs (a handler
that cooperates and one that does not), and after it finished (see test_dispatcher for that
one: it needs no process)."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

import testing.handlers_for_tests  # noqa: F401  (the test-only handlers, as in the workers)
from executions.models import Execution
from scheduling.execution_changes import execution_cancel
from testing.fixtures import CANCEL_GRACE_SECONDS, LEASE_SECONDS, SWEEP_SECONDS
from testing.harness import events, execution_in, history, wait_for
from testing.steps import claim

pytestmark = pytest.mark.e2e
HEARTBEAT = LEASE_SECONDS / 3


def test_cancelled_pending_and_queued_executions_never_run(live, tenant, make_job, api):
    """PENDING → CANCELLED at once, and the dispatcher never claims it when it falls due.
    QUEUED → CANCELLED at once, and the message already on its way is dropped by the worker."""
    worker = live.worker()
    queued_job = make_job(tenant, run_at=timezone.now())
    (message,) = claim(timezone.now())
    queued = Execution.objects.get(job=queued_job)
    assert queued.state == "QUEUED"

    response = api.post(f"/v1/executions/{queued.pk}/cancel")
    assert response.status_code == 202 and response.json()["state"] == "CANCELLED"
    live.publisher.publish([message])
    wait_for(
        lambda: f"dropping delivery of {queued.pk} (lease 1)" in worker.log(),
        timeout=10,
        what="the worker to drop the cancelled execution's message",
    )
    assert history(queued.pk) == [("", "PENDING"), ("PENDING", "QUEUED"), ("QUEUED", "CANCELLED")]

    live.dispatcher()
    live.ready()
    now = timezone.now()
    pending = Execution.objects.get(job=make_job(tenant, run_at=now + timedelta(seconds=1)))
    sentinel = Execution.objects.get(job=make_job(tenant, run_at=now + timedelta(seconds=1.5)))
    assert execution_cancel(execution=pending, now=timezone.now()) == "CANCELLED"
    # The dispatcher has run a job due after the cancelled one: it went past it.
    wait_for(lambda: execution_in(sentinel.pk, "SUCCEEDED"), timeout=10, what="a later job to run")
    assert history(pending.pk) == [("", "PENDING"), ("PENDING", "CANCELLED")]


def test_cancelling_a_running_sleep_stops_it_within_a_heartbeat(live, tenant, make_job, api):
    """A running `sleep` (which honours cancellation) is CANCELLED by its own worker within about
    one heartbeat (lease/3) of the request; the worker process carries on."""
    worker = live.worker(concurrency=1, wait=False)
    live.dispatcher()
    live.ready()
    job = make_job(tenant, run_at=timezone.now(), handler="sleep", payload={"seconds": 30})
    execution = Execution.objects.get(job=job)
    running = wait_for(lambda: execution_in(execution.pk, "RUNNING"), timeout=10, what="the run to start")
    child = int(running.worker_id.rsplit(":", 1)[1])

    response = api.post(f"/v1/executions/{execution.pk}/cancel")
    assert response.status_code == 202 and response.json()["state"] == "RUNNING"
    done = wait_for(lambda: execution_in(execution.pk, "CANCELLED"), timeout=10, what="the run to be cancelled")

    assert (done.finished_at - done.cancel_requested_at).total_seconds() < HEARTBEAT + 1.0
    last_two = [(e.from_state, e.to_state, e.worker_id) for e in events(done.pk)][-2:]
    assert last_two == [("RUNNING", "RUNNING", running.worker_id), ("RUNNING", "CANCELLED", running.worker_id)]
    assert events(done.pk)[-1].message == "cancelled"
    assert worker.children() == [child]


def test_a_cancel_reaches_a_running_worker_at_once(live, settings, tenant, make_job, api):
    """A running `sleep` is CANCELLED within a second of the API's cancel, with a lease of 30 s:
    the request is pushed to the worker (NOTIFY on PostgreSQL, the relay's poll on the embedded
    default), whose relay signals the pool process to beat at once. Its next heartbeat was 10 s
    away, so the heartbeat cannot have been what stopped it."""
    lease = {"TICKWORK_LEASE_SECONDS": "30"}
    settings.TICKWORK_LEASE_SECONDS = 30.0
    worker = live.worker(concurrency=1, wait=False, env=lease)
    live.dispatcher(env=lease)
    live.ready()
    job = make_job(tenant, run_at=timezone.now(), handler="sleep", payload={"seconds": 30})
    execution = Execution.objects.get(job=job)
    running = wait_for(lambda: execution_in(execution.pk, "RUNNING"), timeout=10, what="the run to start")
    child = int(running.worker_id.rsplit(":", 1)[1])

    asked = time.monotonic()
    response = api.post(f"/v1/executions/{execution.pk}/cancel")
    done = wait_for(
        lambda: execution_in(execution.pk, "CANCELLED"), timeout=15, interval=0.01, what="the run to be cancelled"
    )
    took = time.monotonic() - asked

    assert response.status_code == 202 and response.json()["state"] == "RUNNING"
    assert took < 1.0, f"cancelled {took:.2f}s after the request"
    assert events(done.pk)[-1].message == "cancelled"
    assert events(done.pk)[-1].worker_id == running.worker_id
    assert worker.children() == [child]  # stopped by its handler's cooperation, not by force
    assert f"cancel requested for a run of {running.worker_id}" in worker.log()  # the relay passed it on


def test_a_running_handler_that_ignores_cancellation_is_stopped_by_force(live, tenant, make_job):
    """A handler that never checks for cancellation is CANCELLED after the grace, by its worker's
    forced stop (or the sweeper's backstop), and the prefork child running it is ended and
    replaced; the worker goes on running jobs."""
    worker = live.worker(concurrency=1, wait=False)
    live.sweeper()
    live.dispatcher()
    live.ready()
    job = make_job(tenant, run_at=timezone.now(), handler="test-stubborn", payload={"seconds": 60})
    execution = Execution.objects.get(job=job)
    running = wait_for(lambda: execution_in(execution.pk, "RUNNING"), timeout=10, what="the run to start")
    child = int(running.worker_id.rsplit(":", 1)[1])

    assert execution_cancel(execution=running, now=timezone.now()) == "RUNNING"
    done = wait_for(lambda: execution_in(execution.pk, "CANCELLED"), timeout=15, what="the forced cancel")

    took = (done.finished_at - done.cancel_requested_at).total_seconds()
    # Not before the handler had its grace; no later than the worker's force (a beat and the
    # grace) or the sweeper's (two graces and a sweep), whichever came first, plus slack.
    assert (
        CANCEL_GRACE_SECONDS
        <= took
        < max(HEARTBEAT + CANCEL_GRACE_SECONDS, 2 * CANCEL_GRACE_SECONDS + SWEEP_SECONDS) + 1
    )
    assert "forced" in events(done.pk)[-1].message
    wait_for(lambda: child not in worker.children(), timeout=10, what=f"worker child {child} to end")
    wait_for(lambda: len(worker.children()) == 1, timeout=10, what="the pool to replace its child")
    after = Execution.objects.get(job=make_job(tenant, run_at=timezone.now()))
    ok = wait_for(lambda: execution_in(after.pk, "SUCCEEDED"), timeout=10, what="the next job to run")
    assert ok.worker_id != running.worker_id
