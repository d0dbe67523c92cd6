"""Messages that carry several runs (background/publisher.py, worker/batches.py), with real worker
processes: each run starts once under its own lease token, the runs behind a long one go to
another slot, a worker told to stop hands back what it has not begun, and the dispatcher batches
what it publishes for a pool beyond its slots."""

import signal
import time

import pytest
from django.utils import timezone

from background.publisher import BATCH_TASK_NAME, Dispatch, InMemoryPublisher
from dispatcher import dispatcher
from executions.models import Execution
from testing.harness import history, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.both_stores]
HAPPY = [("", "PENDING"), ("PENDING", "QUEUED"), ("QUEUED", "RUNNING"), ("RUNNING", "SUCCEEDED")]


def _claimed(tenant, make_job, specs) -> list[Dispatch]:
    """Jobs of (handler, payload) due now, claimed into QUEUED: their dispatches, in order."""
    now = timezone.now()
    for handler, payload in specs:
        make_job(tenant, run_at=now, handler=handler, payload=payload, now=now)
    claimed = InMemoryPublisher()
    dispatcher.run_once(now=timezone.now(), publisher=claimed)
    assert len(claimed.sent) == len(specs)
    by_id = {str(job.executions.get().pk): i for i, job in enumerate(_jobs(tenant))}
    return sorted(claimed.sent, key=lambda d: by_id[d.execution_id])


def _succeeded(dispatches: list[Dispatch]) -> int:
    return Execution.objects.filter(pk__in=[d.execution_id for d in dispatches], state="SUCCEEDED").count()


def _jobs(tenant):
    from jobs.models import Job

    return Job.objects.filter(tenant=tenant).order_by("created_at", "id")


def test_a_batch_runs_each_run_once_and_drops_duplicates_and_stale_tokens(live, tenant, make_job):
    """One message of three runs, published twice, plus a run under a stale token in a third: each
    run starts once and SUCCEEDS with the happy path's history; the second copy's three and the
    stale one are dropped."""
    worker = live.worker(concurrency=2)
    sent = _claimed(tenant, make_job, [("noop", {})] * 3)
    stale = Dispatch(sent[0].execution_id, 0, sent[0].pool, sent[0].priority)
    live.publisher.publish_messages([sent, [stale, sent[1]], sent])
    wait_for(lambda: _succeeded(sent) == 3, timeout=20, what="the runs")
    wait_for(lambda: worker.log().count("dropping delivery of") == 5, timeout=10, what="the copies to be dropped")
    assert f"dropping delivery of {stale.execution_id} (lease 0)" in worker.log()
    for item in sent:
        assert history(item.execution_id) == HAPPY
    assert BATCH_TASK_NAME in worker.log()


def test_runs_behind_a_long_one_are_handed_back_to_another_slot(live, tenant, make_job):
    """A batch of a 6 s sleep and two noops: after the hand-back time the noops go back to the
    queue and the worker's other slot runs them while the sleep still runs, each once."""
    worker = live.worker(concurrency=2)
    sent = _claimed(tenant, make_job, [("sleep", {"seconds": 6}), ("noop", {}), ("noop", {})])
    live.publisher.publish_messages([sent])
    wait_for(lambda: _succeeded(sent[1:]) == 2, timeout=5, what="the noops")
    assert Execution.objects.get(pk=sent[0].execution_id).state == "RUNNING"
    assert "handing back 2 run(s) of a batch" in worker.log()
    wait_for(lambda: Execution.objects.get(pk=sent[0].execution_id).state == "SUCCEEDED", timeout=10, what="sleep")
    for item in sent:
        assert history(item.execution_id) == HAPPY


def test_a_worker_told_to_stop_hands_back_the_runs_it_has_not_begun(live, tenant, make_job):
    """SIGTERM while a batch's first run (a sleep) runs: that run is released to PENDING, the
    batch's other run, never begun, stays QUEUED under its token and goes back to the broker, where
    the next worker takes it and runs it once."""
    first = live.worker(concurrency=1, env={"TICKWORK_BATCH_HAND_BACK_SECONDS": "60"})
    sent = _claimed(tenant, make_job, [("sleep", {"seconds": 60}), ("noop", {})])
    live.publisher.publish_messages([sent])
    wait_for(lambda: Execution.objects.get(pk=sent[0].execution_id).state == "RUNNING", timeout=20, what="the sleep")
    first.signal(signal.SIGTERM)
    wait_for(lambda: not first.members(), timeout=15, what="the first worker to end")
    assert Execution.objects.get(pk=sent[0].execution_id).state == "PENDING"
    assert Execution.objects.get(pk=sent[1].execution_id).state == "QUEUED"
    assert "handing back 1 run(s) of a batch: this worker is shutting down" in first.log()

    if f"not starting {sent[1].execution_id}" in first.log():
        # The filesystem broker's consumer polls on through a warm shutdown, so the worker that
        # was stopping may have taken the message back (and dropped it, as any message it takes
        # then): the run is still QUEUED, and the sweeper publishes it again (here at once).
        Execution.objects.filter(pk=sent[1].execution_id).update(republish_at=timezone.now())
        live.sweeper()
    live.worker(concurrency=1)
    wait_for(lambda: Execution.objects.get(pk=sent[1].execution_id).state == "SUCCEEDED", timeout=30, what="the noop")
    moves = history(sent[1].execution_id)
    assert moves.count(("QUEUED", "RUNNING")) == 1 and ("RUNNING", "PENDING") not in moves, moves


def test_the_dispatcher_batches_a_pools_runs_beyond_its_slots(live, tenant, make_job):
    """Forty noop jobs due at once for a worker of two slots: the dispatcher publishes them in
    batches, and each runs once, with the happy path's history."""
    worker = live.worker(concurrency=2, wait=False)
    live.dispatcher()
    live.ready()
    now = timezone.now()
    ids = [make_job(tenant, run_at=now, handler="noop", now=now).executions.get().pk for _ in range(40)]
    started = time.monotonic()
    wait_for(
        lambda: Execution.objects.filter(pk__in=ids, state="SUCCEEDED").count() == 40, timeout=60, what="all forty"
    )
    print(f"forty in {time.monotonic() - started:.2f} s")
    assert BATCH_TASK_NAME in worker.log()
    for execution_id in ids:
        assert history(execution_id) == HAPPY
