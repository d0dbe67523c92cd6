"""End-to-end runs through real processes: dispatcher, sweeper and Celery prefork workers."""

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from jobs.models import Job, Priority
from testing.harness import events, execution_in, history, wait_for

pytestmark = pytest.mark.e2e


def test_one_off_job_runs_once_and_is_dispatched_within_a_second_of_its_time(live, tenant, make_job):
    """A ONCE job due in 1.5 s runs exactly once; it is dispatched (queuedAt - scheduledFor) within
    a second of its time and starts soon after, and the job is COMPLETED when its execution
    SUCCEEDED."""
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    job = make_job(tenant, run_at=timezone.now() + timedelta(seconds=1.5), payload={"hello": "world"})
    execution = Execution.objects.get(job=job)

    done = wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=15, what="the run to succeed")

    # The dispatcher's part is held to a second: it wakes for the job's time, not at a later poll.
    # The worker's part adds the broker's delivery and the pickup by a process, which a saturated
    # machine (CI's test processes on two CPUs) stretches past a second now and then: it is held to
    # "soon", and the start lag's figures are the benchmark's (bench/README.md, "Due → start lag").
    dispatched = (done.queued_at - done.scheduled_for).total_seconds()
    started = (done.started_at - done.scheduled_for).total_seconds()
    assert 0 <= dispatched < 1.0, f"dispatched {dispatched:.3f}s after its time"
    assert dispatched <= started < dispatched + 3.0, f"started {started:.3f}s after its time"
    assert done.result == {"hello": "world"}
    assert history(done.pk) == [("", "PENDING"), ("PENDING", "QUEUED"), ("QUEUED", "RUNNING"), ("RUNNING", "SUCCEEDED")]
    assert done.lease_token == 1 and done.attempt == 1
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"


def test_defect7_with_future_work_pending_the_dispatcher_loop_runs_clean_and_on_time(live, tenant, make_job):
    """A cron job's next fire lies in the future (any cron job makes one): the dispatcher's loop
    peeks at it and sleeps by it without an error, and a one-off job due meanwhile is dispatched
    within a second of its time. On the embedded default the peek once read the time naive, and
    the loop raised TypeError and fell back to a one-second retry on every pass."""
    live.worker(wait=False)
    dispatcher = live.dispatcher()
    live.ready()
    make_job(tenant, type="CRON", schedule="0 0 1 1 *")
    job = make_job(tenant, run_at=timezone.now() + timedelta(seconds=1.5))
    execution = Execution.objects.get(job=job)

    done = wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=15, what="the run to succeed")

    lag = (done.queued_at - done.scheduled_for).total_seconds()
    assert 0 <= lag < 1.0, f"dispatched {lag:.3f}s after its time"
    assert "Traceback" not in dispatcher.log() and " ERROR " not in dispatcher.log(), dispatcher.tail()


def test_high_priority_starts_before_a_low_backlog_already_on_the_broker(live, tenant, make_job):
    """A pool with one worker slot and a backlog of LOW runs, as much of it admitted (published) as
    the slot allows: HIGH jobs created afterwards start next (after at most the run in progress and
    what is on the broker or taken ahead), not after the backlog."""
    if live.broker_url.startswith("filesystem"):
        pytest.skip("kombu's filesystem broker has no message priorities: first come, first served (README)")
    live.worker(concurrency=1, wait=False)
    live.dispatcher()
    live.ready()
    now = timezone.now()
    lows = [
        make_job(tenant, run_at=now, handler="sleep", payload={"seconds": 0.3}, priority=Priority.LOW, now=now)
        for _ in range(10)
    ]
    wait_for(
        lambda: Execution.objects.filter(job__in=lows, state__in=["QUEUED", "RUNNING"]).count() >= 2,
        timeout=15,
        what="the LOW backlog admitted (one slot x headroom 2)",
    )
    highs = [make_job(tenant, run_at=timezone.now(), priority=Priority.HIGH) for _ in range(2)]

    wait_for(
        lambda: Execution.objects.filter(job__in=lows + highs, state="SUCCEEDED").count() == 12,
        timeout=30,
        what="every run",
    )
    order = list(
        Execution.objects.filter(job__in=lows + highs).order_by("started_at").values_list("job__priority", flat=True)
    )
    lows_before_high = order.index(Priority.HIGH)
    assert lows_before_high <= 3, f"start order {order}"
    assert order[lows_before_high : lows_before_high + 2] == [Priority.HIGH, Priority.HIGH]


def test_failing_job_is_retried_by_its_policy_and_ends_dead_after_max_attempts(live, tenant, make_job):
    """`fail` with maxAttempts 3, FIXED 1000 ms, no jitter: exactly three attempts, each started
    at least 1 s after the previous one (and not much later), then DEAD; the job is COMPLETED."""
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    job = make_job(
        tenant,
        run_at=timezone.now(),
        handler="fail",
        max_attempts=3,
        backoff="FIXED",
        initial_delay_ms=1000,
        jitter=False,
    )
    execution = Execution.objects.get(job=job)

    dead = wait_for(lambda: execution_in(execution.pk, "DEAD"), timeout=20, what="the execution to be DEAD")

    assert dead.attempt == 3
    assert history(dead.pk) == [
        ("", "PENDING"),
        *[("PENDING", "QUEUED"), ("QUEUED", "RUNNING"), ("RUNNING", "FAILED"), ("FAILED", "PENDING")] * 2,
        ("PENDING", "QUEUED"),
        ("QUEUED", "RUNNING"),
        ("RUNNING", "FAILED"),
        ("FAILED", "DEAD"),
    ]
    starts = [e.at for e in events(dead.pk) if e.to_state == "RUNNING"]
    assert [e.attempt for e in events(dead.pk) if e.to_state == "RUNNING"] == [1, 2, 3]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    assert all(1.0 <= gap < 2.5 for gap in gaps), gaps
    assert "failing on purpose (attempt 3)" in dead.error
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"


def test_timed_out_attempts_follow_the_retry_policy(live, tenant, make_job):
    """A `sleep` of 30 s with timeoutSec 1 and maxAttempts 2 is stopped by its worker's heartbeat
    each time: two TIMED_OUT attempts, then DEAD."""
    live.worker(wait=False)
    live.sweeper()
    live.dispatcher()
    live.ready()
    job = make_job(
        tenant,
        run_at=timezone.now(),
        handler="sleep",
        payload={"seconds": 30},
        timeout_sec=1,
        max_attempts=2,
        backoff="FIXED",
        initial_delay_ms=100,
        jitter=False,
    )
    execution = Execution.objects.get(job=job)

    dead = wait_for(lambda: execution_in(execution.pk, "DEAD"), timeout=20, what="the execution to be DEAD")

    assert dead.attempt == 2
    assert [(e.from_state, e.to_state) for e in events(dead.pk) if e.from_state == "RUNNING"] == [
        ("RUNNING", "TIMED_OUT"),
        ("RUNNING", "TIMED_OUT"),
    ]
    timed_out = [e for e in events(dead.pk) if e.to_state == "TIMED_OUT"]
    # The cooperative handler was stopped by its own worker, not by the sweeper's backstop.
    assert [e.message for e in timed_out] == ["timed out", "timed out"]
    assert history(dead.pk)[-1] == ("TIMED_OUT", "DEAD")
    for e in timed_out:
        started = next(s.at for s in events(dead.pk) if s.to_state == "RUNNING" and s.attempt == e.attempt)
        assert 1.0 <= (e.at - started).total_seconds() < 1.0 + 3.0 / 3 + 1.0


def test_non_cooperative_timeout_is_enforced_and_the_worker_process_replaced(live, tenant, make_job):
    """A handler that ignores stops, past its timeoutSec 1 (maxAttempts 1), is TIMED_OUT then
    DEAD, enforced by the forced stop or the sweeper; the prefork child that ran it is ended and
    replaced, and the worker goes on running jobs."""
    worker = live.worker(concurrency=1, wait=False)
    live.sweeper()
    live.dispatcher()
    live.ready()
    job = make_job(
        tenant, run_at=timezone.now(), handler="test-stubborn", payload={"seconds": 30}, timeout_sec=1, max_attempts=1
    )
    execution = Execution.objects.get(job=job)
    running = wait_for(lambda: execution_in(execution.pk, "RUNNING"), timeout=10, what="the run to start")
    child = int(running.worker_id.rsplit(":", 1)[1])

    dead = wait_for(lambda: execution_in(execution.pk, "DEAD"), timeout=10, what="the execution to be DEAD")

    assert history(dead.pk)[-2:] == [("RUNNING", "TIMED_OUT"), ("TIMED_OUT", "DEAD")]
    assert (dead.finished_at - dead.started_at).total_seconds() < 1.0 + 3.0 / 3 + 2 * 1.0 + 1.0
    wait_for(lambda: child not in worker.children(), timeout=10, what=f"worker child {child} to end")
    wait_for(lambda: len(worker.children()) == 1, timeout=10, what="the pool to replace its child")
    after = make_job(tenant, run_at=timezone.now())
    ok = wait_for(
        lambda: Execution.objects.filter(job=after, state="SUCCEEDED").first(), timeout=10, what="the next job"
    )
    assert ok.worker_id != running.worker_id
