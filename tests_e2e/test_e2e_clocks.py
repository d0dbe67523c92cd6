"""Roles on hosts whose clocks disagree (defect 12): every time that decides correctness is the
database's, so a worker, a dispatcher and a sweeper with shifted clocks (libfaketime) still agree
on leases, due times and the order of a run's events."""

import time
from datetime import timedelta

import pytest
from django.db import connection

from executions.clock import db_now
from executions.models import Execution
from scheduler_project.tests.faketime import faketime_env
from testing.fixtures import LEASE_SECONDS
from testing.harness import events, execution_in, wait_for

pytestmark = pytest.mark.e2e


def test_defect12_skewed_roles_neither_reclaim_a_live_run_nor_fire_early_and_keep_the_timeline_in_order(
    live, tenant, make_job
):
    """A worker 25 s behind runs a job that outlasts two leases: its heartbeats keep the lease
    (no FAILED_WORKER_LOST) although a sweeper 10 s ahead watches it. A dispatcher 25 s ahead
    does not claim the job before it is due by the database's clock. The run's events are in
    order: scheduled ≤ queued ≤ started ≤ finished."""
    if connection.vendor != "postgresql":
        pytest.skip("the embedded default runs every role on one host, whose clock is the database's")
    live.worker(concurrency=1, env=faketime_env("-25s"), wait=False)
    live.dispatcher(env=faketime_env("+25s"))
    live.sweeper(env=faketime_env("+10s"))
    live.ready()
    now = db_now()
    due = now + timedelta(seconds=4)
    job = make_job(
        tenant,
        now=now,
        run_at=due,
        handler="sleep",
        payload={"seconds": 2.5 * LEASE_SECONDS},
        max_attempts=1,
        timeout_sec=60,
    )
    execution = Execution.objects.get(job=job)

    # Not before it is due: until a moment before, it is still waiting.
    while db_now() < due - timedelta(seconds=0.5):
        assert execution_in(execution.pk, "PENDING"), f"claimed before it was due ({due.isoformat()})"
        time.sleep(0.1)
    done = wait_for(
        lambda: execution_in(execution.pk, "SUCCEEDED", "DEAD", "CANCELLED"), timeout=40, what="the run to end"
    )

    timeline = events(done.pk)
    assert done.state == "SUCCEEDED", [(e.to_state, e.message) for e in timeline]
    assert done.attempt == 1
    assert not [e for e in timeline if e.to_state == "FAILED_WORKER_LOST"]
    assert due <= done.queued_at <= done.started_at <= done.finished_at
    # Appended in this order (ids), and their times say the same.
    assert [e.to_state for e in timeline if e.from_state != e.to_state] == ["PENDING", "QUEUED", "RUNNING", "SUCCEEDED"]
    assert [e.at for e in timeline] == sorted(e.at for e in timeline)
    assert timeline[0].at <= due <= timeline[1].at
