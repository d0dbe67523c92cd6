"""Faults with real processes: a worker killed or frozen mid-run, a publish lost after commit."""

import signal

import pytest
from django.utils import timezone

from dispatcher import dispatcher
from executions.models import Execution
from testing.fixtures import LEASE_SECONDS
from testing.harness import events, execution_in, history, wait_for

pytestmark = pytest.mark.e2e
REPUBLISHED = ("QUEUED", "QUEUED")  # a re-publish by the sweeper; harmless, and timing-dependent


def _two_workers(live):
    return [live.worker(concurrency=1, wait=False) for _ in range(2)]


def _retrying_sleep(make_job, tenant, seconds: float):
    return make_job(
        tenant,
        run_at=timezone.now(),
        handler="sleep",
        payload={"seconds": seconds},
        max_attempts=3,
        backoff="FIXED",
        initial_delay_ms=200,
        jitter=False,
    )


def test_worker_killed_mid_job_is_reclaimed_after_its_lease_and_succeeds_elsewhere(live, tenant, make_job):
    """SIGKILL to a worker's whole process group while it runs a `sleep`: once the lease expires
    the sweeper records FAILED_WORKER_LOST and the retry runs on the other worker. Exactly one
    SUCCEEDED."""
    _two_workers(live)
    live.sweeper()
    live.dispatcher()
    live.ready()
    execution = Execution.objects.get(job=_retrying_sleep(make_job, tenant, 2))
    first = wait_for(lambda: execution_in(execution.pk, "RUNNING"), timeout=10, what="the first attempt to start")
    victim = live.worker_of(first.worker_id)

    victim.signal(signal.SIGKILL)
    wait_for(lambda: not victim.members(), timeout=5, what="the killed worker to be gone")
    done = wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=20, what="the retry to succeed")

    assert done.attempt == 2 and done.lease_token == 2
    assert done.worker_id != first.worker_id
    assert live.worker_of(done.worker_id) is not victim
    assert [h for h in history(done.pk) if h != REPUBLISHED] == [
        ("", "PENDING"),
        ("PENDING", "QUEUED"),
        ("QUEUED", "RUNNING"),
        ("RUNNING", "FAILED_WORKER_LOST"),
        ("FAILED_WORKER_LOST", "PENDING"),
        ("PENDING", "QUEUED"),
        ("QUEUED", "RUNNING"),
        ("RUNNING", "SUCCEEDED"),
    ]
    lost = next(e for e in events(done.pk) if e.to_state == "FAILED_WORKER_LOST")
    # Not before the lease ran out: at least a lease after the start (no heartbeat came).
    assert (lost.at - first.started_at).total_seconds() >= LEASE_SECONDS


def test_frozen_worker_cannot_overwrite_the_new_attempt_and_stops_its_handler(live, tenant, make_job):
    """A worker frozen (SIGSTOP) past its lease is reclaimed and the retry runs on the other
    worker. Resumed (SIGCONT) while the retry runs, the frozen worker's heartbeat finds its lease
    lost and stops its handler; every write it tries is fenced by the lease token, so the row
    ends with the second worker's outcome and the history has no write of the frozen one after
    the reclaim."""
    _two_workers(live)
    live.sweeper()
    live.dispatcher()
    live.ready()
    execution = Execution.objects.get(job=_retrying_sleep(make_job, tenant, 8))
    first = wait_for(lambda: execution_in(execution.pk, "RUNNING"), timeout=10, what="the first attempt to start")
    frozen = live.worker_of(first.worker_id)

    frozen.signal(signal.SIGSTOP)
    second = wait_for(
        lambda: Execution.objects.filter(pk=execution.pk, state="RUNNING", attempt=2).first(),
        timeout=20,
        what="the retry to start on the other worker",
    )
    frozen.signal(signal.SIGCONT)
    wait_for(
        lambda: f"stopping execution {execution.pk}: lease lost" in frozen.log(),
        timeout=10,
        what="the resumed worker's heartbeat to find its lease lost",
    )
    done = wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=20, what="the retry to succeed")

    assert second.worker_id != first.worker_id and live.worker_of(second.worker_id) is not frozen
    assert done.worker_id == second.worker_id
    assert done.attempt == 2 and done.lease_token == 2
    assert done.started_at == second.started_at and done.result == {"slept": 8.0}
    after_reclaim = [
        (e.from_state, e.to_state, e.worker_id)
        for e in events(done.pk)[[e.to_state for e in events(done.pk)].index("FAILED_WORKER_LOST") :]
        if (e.from_state, e.to_state) != REPUBLISHED
    ]
    assert after_reclaim == [
        ("RUNNING", "FAILED_WORKER_LOST", first.worker_id),  # written by the sweeper
        # The retry starts with a clean run record: no worker until one starts it.
        ("FAILED_WORKER_LOST", "PENDING", ""),
        ("PENDING", "QUEUED", ""),
        ("QUEUED", "RUNNING", second.worker_id),
        ("RUNNING", "SUCCEEDED", second.worker_id),
    ]
    # Its handler was stopped by the heartbeat, not left to finish, and its process lives on.
    assert "outcome discarded" not in frozen.log()
    assert frozen.alive()


def test_claim_committed_but_never_published_runs_exactly_once(live, tenant, make_job):
    """A dispatcher that dies between its commit and its publish leaves a QUEUED row nobody
    heard of: the sweeper publishes it again after the publish grace and it runs exactly once."""
    live.worker(wait=False)
    live.sweeper()
    live.ready()
    execution = Execution.objects.get(job=make_job(tenant, run_at=timezone.now()))

    class LostPublish:
        calls = 0

        def publish(self, dispatches):
            self.calls += 1  # the process "died" here: nothing reaches the broker

    lost = LostPublish()
    result = dispatcher.run_once(now=timezone.now(), publisher=lost)
    assert result.claimed == 1 and lost.calls == 1
    assert Execution.objects.get(pk=execution.pk).state == "QUEUED"

    done = wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=15, what="the republished run")

    assert history(done.pk) == [
        ("", "PENDING"),
        ("PENDING", "QUEUED"),
        REPUBLISHED,
        ("QUEUED", "RUNNING"),
        ("RUNNING", "SUCCEEDED"),
    ]
    assert done.lease_token == 1 and done.publish_count == 2
