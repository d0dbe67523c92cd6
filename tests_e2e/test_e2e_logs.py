"""End-to-end: what a handler logs, in a real Celery prefork worker, is kept with each attempt."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from readmodels import logs
from testing.harness import execution_in, wait_for

pytestmark = pytest.mark.e2e


def test_each_attempts_lines_are_kept_apart_and_written_before_its_outcome(live, tenant, make_job):
    """`test-logs` with failFirst logs two lines by ctx.log and two by its module's logger, then
    fails its first attempt (with an ERROR line) and succeeds its second. Each attempt's lines are
    kept under it, in the order logged, and nothing of the worker's own logging (start, outcome,
    heartbeats, Celery's "Task succeeded") is among them. The lines are there once the outcome is."""
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    job = make_job(
        tenant,
        run_at=timezone.now(),
        handler="test-logs",
        payload={"failFirst": True},
        max_attempts=2,
        backoff="FIXED",
        initial_delay_ms=100,
        jitter=False,
    )
    execution = Execution.objects.get(job=job)

    done = wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=30, what="the second attempt to succeed")

    assert done.attempt == 2
    lines = [(line.attempt, line.seq, line.level, line.logger, line.message) for line in logs.log_lines(execution=done)]
    assert lines == [
        (1, 1, "INFO", "test-logs", "attempt 1: line 1 by ctx.log"),
        (1, 2, "INFO", "testing.handlers_for_tests", "attempt 1: line 1 by logging"),
        (1, 3, "INFO", "test-logs", "attempt 1: line 2 by ctx.log"),
        (1, 4, "INFO", "testing.handlers_for_tests", "attempt 1: line 2 by logging"),
        (1, 5, "ERROR", "testing.handlers_for_tests", "attempt 1: giving up"),
        (2, 1, "INFO", "test-logs", "attempt 2: line 1 by ctx.log"),
        (2, 2, "INFO", "testing.handlers_for_tests", "attempt 2: line 1 by logging"),
        (2, 3, "INFO", "test-logs", "attempt 2: line 2 by ctx.log"),
        (2, 4, "INFO", "testing.handlers_for_tests", "attempt 2: line 2 by logging"),
    ]
    first, last = logs.log_lines(execution=done, attempt=1).first(), logs.log_lines(execution=done).last()
    assert done.started_at - timedelta(seconds=5) < first.at and last.at <= done.finished_at + timedelta(seconds=1)
    assert logs.log_dropped(execution=done) == {}
