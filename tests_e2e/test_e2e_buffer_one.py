"""concurrencyPolicy BUFFER_ONE on real workers and a real dispatcher: an INTERVAL job firing every
second whose runs take 2 s never has two runs at once, never more than one fire waiting, skips the
fires that come while one waits (saying BUFFER_ONE), and starts the waiting fire as soon as the
run before it ends, not at a later fire."""

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution, ExecutionEvent
from testing.harness import wait_for

pytestmark = pytest.mark.e2e


def test_a_one_second_job_of_two_second_runs_buffers_one_and_never_overlaps(live, tenant, make_job):
    live.worker()
    live.dispatcher()
    live.ready()
    start = timezone.now() + timedelta(seconds=1)
    job = make_job(
        tenant,
        type="INTERVAL",
        every_sec=1,
        start_at=start,
        handler="sleep",
        payload={"seconds": 2},
        concurrency_policy="BUFFER_ONE",
    )
    most_waiting = 0

    def three_done():
        nonlocal most_waiting
        waiting = Execution.objects.filter(job=job, state="BLOCKED").count()
        most_waiting = max(most_waiting, waiting)
        done = list(Execution.objects.filter(job=job, state="SUCCEEDED").order_by("started_at"))
        return done if len(done) >= 3 else None

    done = wait_for(three_done, timeout=30, interval=0.05, what="three runs of the buffered job to succeed")
    assert most_waiting <= 1
    ran = list(Execution.objects.filter(job=job, started_at__isnull=False).order_by("started_at"))
    for before, after in itertools.pairwise(ran):
        assert before.finished_at is not None and before.finished_at <= after.started_at, (before, after)
    # Each run after the first is a fire that waited (due while the run before went on) and
    # started once that run ended, on a dispatcher pass soon after: a poll is 1 s, and a loaded
    # CI machine adds to the worker's pickup, hence the bound of a few seconds.
    for before, after in itertools.pairwise(done):
        assert after.scheduled_for < before.finished_at, (before, after)
        assert after.started_at - before.finished_at < timedelta(seconds=5), (before, after)
    skipped = ExecutionEvent.objects.filter(execution__job=job, to_state="CANCELLED").values_list("message", flat=True)
    assert skipped and all("BUFFER_ONE" in message for message in skipped)
