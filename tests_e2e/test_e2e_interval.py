"""An INTERVAL job of 2 s on real workers and a real dispatcher: each fire runs, on the grid
start + k * 2 s, whatever the runs' lengths (anchored: no drift)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from testing.harness import wait_for

pytestmark = pytest.mark.e2e


def test_a_two_second_interval_job_runs_every_fire_on_its_grid(live, tenant, make_job):
    live.worker()
    live.dispatcher()
    live.ready()
    start = timezone.now() + timedelta(seconds=1)
    # Each run sleeps 0.7 s: a schedule that counted from the end of a run would drift by that much a fire.
    job = make_job(tenant, type="INTERVAL", every_sec=2, start_at=start, handler="sleep", payload={"seconds": 0.7})

    def four_done():
        done = list(Execution.objects.filter(job=job, state="SUCCEEDED").order_by("scheduled_for"))
        return done if len(done) >= 4 else None

    done = wait_for(four_done, timeout=30, what="four fires of the interval job to succeed")
    assert [e.scheduled_for for e in done[:4]] == [start + timedelta(seconds=2 * k) for k in range(4)]
    for execution in done[:4]:
        # Started on time: the dispatcher wakes for each fire (the poll is 0.2 s here).
        assert execution.started_at - execution.scheduled_for < timedelta(seconds=1.5), execution
