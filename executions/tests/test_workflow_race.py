"""The last two upstream steps of a step succeed at the same moment, in two transactions on two
connections (real PostgreSQL, real commits): the step is released exactly once. Each transaction
records its success and then looks at the run; were the look not serialised by the run's row
lock, each would see the other step still RUNNING (its transaction not committed) and neither
would release it. The test holds both transactions at that look until both have recorded their
success, so the interleaving that loses the release without the lock happens every time."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from executions import steps, transitions
from executions.models import Execution, ExecutionEvent
from scheduling.tests.test_workflow_runs import _steps, _workflow_job
from store import Success
from testing.steps import capacity, start

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_upstream_steps_succeeding_at_once_release_their_downstream_step_once(tenant, make_job, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("two writers at once: PostgreSQL (SQLite has one writer at a time)")
    now = timezone.now()
    capacity(now)
    job = _workflow_job(make_job, tenant, now)
    rows = _steps(job)
    transitions.queue_many([rows["a"].pk], now=now, publish_grace=timezone.timedelta(seconds=30))
    a = start(rows["a"].pk, now=now)
    assert transitions.succeed(execution_id=a.pk, lease_token=a.lease_token, now=now, result=None)
    transitions.queue_many([rows["b"].pk, rows["c"].pk], now=now, publish_grace=timezone.timedelta(seconds=30))
    running = [start(rows[name].pk, now=now) for name in ("b", "c")]

    both_recorded = threading.Barrier(2)
    settle_run = steps.settle_run

    def settle_after_both(run_id, *, now):
        both_recorded.wait(timeout=10)  # each success is written, neither committed
        settle_run(run_id, now=now)

    monkeypatch.setattr(steps, "settle_run", settle_after_both)
    errors: list[BaseException] = []

    def succeed(row) -> None:
        try:
            success = Success(row.pk, row.lease_token, {"step": row.step}, now, run_id=row.run_id)
            transitions.succeed_many([success], now=now)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=succeed, args=(row,)) for row in running]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert not errors, errors
    d = Execution.objects.get(pk=rows["d"].pk)
    assert d.state == "PENDING"
    assert ExecutionEvent.objects.filter(execution=d, from_state="BLOCKED", to_state="PENDING").count() == 1
