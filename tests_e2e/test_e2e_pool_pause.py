"""A paused pool with real processes (a dispatcher and a Celery prefork worker, on PostgreSQL with
Redis and on the embedded default with SQLite and the file broker): its due work is not admitted
however long the dispatcher looks, and runs once the pool is resumed (PostgreSQL's NOTIFY wakes
the dispatcher; the embedded default's finds it at its next poll)."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from executions.clock import db_now
from executions.models import Execution
from scheduling.pool_pauses import pool_pause, pool_resume
from testing.harness import execution_in, wait_for

pytestmark = pytest.mark.e2e


def test_a_paused_pools_work_waits_and_runs_after_resume(live, tenant, make_job):
    live.worker(wait=False)
    dispatcher = live.dispatcher()
    live.ready()
    pool_pause(pool="default", by="user ops", reason="maintenance", now=db_now())
    job = make_job(tenant, run_at=timezone.now() - timedelta(seconds=1))
    execution = Execution.objects.get(job=job)

    time.sleep(3)  # many of the dispatcher's looks: nothing of the paused pool is admitted

    assert Execution.objects.get(pk=execution.pk).state == "PENDING"
    resumed_at = time.monotonic()
    pool_resume(pool="default", now=db_now())
    done = wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=15, what="the run after resume")
    assert time.monotonic() - resumed_at < 5
    assert done.attempt == 1
    assert "Traceback" not in dispatcher.log(), dispatcher.tail()
