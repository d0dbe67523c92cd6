"""Workflow runs in-process, on both stores: a run's steps, their release when their upstream
steps succeed (in the transaction of the last success), the cancellation of what a failed step
keeps from running, and the re-drive that puts it back. Time is injected."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import transitions
from executions.models import Execution, ExecutionEvent, Run
from executions.states import InvalidTransition
from jobs.models import Job
from readmodels.runs import run_state
from scheduling import runs
from scheduling.execution_changes import execution_redrive
from scheduling.failures import execution_settle_failure
from store import Success
from testing.steps import claim, start

pytestmark = pytest.mark.django_db

DIAMOND = {
    "steps": [
        {"name": "a", "target": {"pool": "default", "handler": "noop"}, "payload": {"n": 1}, "depends_on": []},
        {"name": "b", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["a"]},
        {"name": "c", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["a"]},
        {"name": "d", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["b", "c"]},
    ]
}


def _workflow_job(make_job, tenant, now, **fields):
    fields.setdefault("run_at", now)
    return make_job(tenant, workflow=fields.pop("workflow", DIAMOND), pool="", handler="", now=now, **fields)


def _steps(job) -> dict[str, Execution]:
    return {e.step: e for e in Execution.objects.filter(job=job)}


def _states(job) -> dict[str, str]:
    return {step: e.state for step, e in _steps(job).items()}


def test_a_run_is_pending_until_one_of_its_steps_has_begun(tenant, make_job):
    """Issue 31, item 3: a cron workflow's run made for tomorrow was RUNNING with 0 of 4 steps.
    A run none of whose steps has begun (roots PENDING on their first attempt, the rest BLOCKED)
    is PENDING; once its root is admitted it is RUNNING, and so it stays while a step waits for
    a retry."""
    now = timezone.now()
    job = _workflow_job(make_job, tenant, now, type="CRON", schedule="0 2 * * *", timezone="UTC", run_at=None)
    root = _steps(job)["a"]
    assert root.scheduled_for > now and root.scheduled_for.hour == 2

    assert run_state((e.state, e.attempt) for e in _steps(job).values()) == "PENDING"
    assert transitions.queue_many([root.pk], now=now, publish_grace=timedelta(seconds=30))
    assert run_state((e.state, e.attempt) for e in _steps(job).values()) == "RUNNING"


@pytest.mark.parametrize(
    ("steps", "state"),
    [
        ([("PENDING", 1), ("BLOCKED", 1)], "PENDING"),
        ([("QUEUED", 1), ("BLOCKED", 1)], "RUNNING"),
        ([("PENDING", 2), ("BLOCKED", 1)], "RUNNING"),  # its root waits to be retried
        ([("SUCCEEDED", 1), ("PENDING", 1)], "RUNNING"),
        ([("CANCELLED", 1), ("CANCELLED", 1)], "CANCELLED"),
        ([("SUCCEEDED", 1), ("DEAD", 2)], "FAILED"),
        ([("SUCCEEDED", 1), ("SUCCEEDED", 3)], "SUCCEEDED"),
    ],
)
def test_a_runs_state_from_its_steps(steps, state):
    assert run_state(steps) == state


def _run_step(execution_id, now, result=None):
    row = start(execution_id, now=now)
    assert transitions.succeed(execution_id=row.pk, lease_token=row.lease_token, now=now, result=result)


def _fail_dead(execution_id, now):
    row = start(execution_id, now=now)
    assert transitions.fail(execution_id=row.pk, lease_token=row.lease_token, now=now, error="boom", traceback="")
    assert execution_settle_failure(execution_id=row.pk, failed_state="FAILED", now=now) == "DEAD"


def test_a_workflow_job_starts_a_run_with_its_roots_pending_and_the_rest_blocked(tenant, make_job):
    now = timezone.now()
    job = _workflow_job(make_job, tenant, now)

    run = Run.objects.get(job=job)
    assert _states(job) == {"a": "PENDING", "b": "BLOCKED", "c": "BLOCKED", "d": "BLOCKED"}
    assert {e.run_id for e in Execution.objects.filter(job=job)} == {run.pk}
    assert [s["name"] for s in run.steps] == ["a", "b", "c", "d"]
    # The run keeps each step's policies made explicit: the job's where the step names none.
    assert run.steps[3]["timeout_sec"] == job.timeout_sec
    assert run.steps[3]["retry_policy"]["max_attempts"] == job.max_attempts


def test_the_diamond_releases_each_step_once_after_all_its_upstream_steps_succeed(tenant, make_job):
    now = timezone.now()
    job = _workflow_job(make_job, tenant, now)
    steps = _steps(job)

    assert [d.execution_id for d in claim(now)] == [str(steps["a"].pk)]
    _run_step(steps["a"].pk, now, {"from": "a"})
    assert _states(job) == {"a": "SUCCEEDED", "b": "PENDING", "c": "PENDING", "d": "BLOCKED"}

    later = now + timedelta(seconds=1)
    assert {d.execution_id for d in claim(later)} == {str(steps["b"].pk), str(steps["c"].pk)}
    _run_step(steps["b"].pk, later)
    assert _states(job)["d"] == "BLOCKED"  # c has not succeeded yet
    _run_step(steps["c"].pk, later)
    assert _states(job)["d"] == "PENDING"
    released = ExecutionEvent.objects.filter(execution_id=steps["d"].pk, from_state="BLOCKED", to_state="PENDING")
    assert released.count() == 1
    assert Execution.objects.get(pk=steps["d"].pk).available_at == later

    claim(later)
    _run_step(steps["d"].pk, later)
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"  # a one-off workflow job ends with its run
    assert run_state((e.state, e.attempt) for e in _steps(job).values()) == "SUCCEEDED"


def test_a_dead_step_cancels_its_downstream_steps_and_not_the_others_and_a_redrive_reopens_them(tenant, make_job):
    now = timezone.now()
    job = _workflow_job(make_job, tenant, now, max_attempts=1)
    steps = _steps(job)
    claim(now)
    _run_step(steps["a"].pk, now)
    claim(now)

    _fail_dead(steps["b"].pk, now)

    assert _states(job) == {"a": "SUCCEEDED", "b": "DEAD", "c": "QUEUED", "d": "CANCELLED"}
    cancelled = ExecutionEvent.objects.filter(execution_id=steps["d"].pk).latest("id")
    assert cancelled.message == "upstream step 'b' ended DEAD"
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"  # c can still run
    _run_step(steps["c"].pk, now)
    assert run_state((e.state, e.attempt) for e in _steps(job).values()) == "FAILED"
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"

    execution_redrive(execution=Execution.objects.get(pk=steps["b"].pk), now=now)

    assert _states(job) == {"a": "SUCCEEDED", "b": "PENDING", "c": "SUCCEEDED", "d": "BLOCKED"}
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"
    claim(now)
    _run_step(steps["b"].pk, now)
    assert _states(job)["d"] == "PENDING"  # c had succeeded: b's success is the last one


def test_cancelling_a_run_cancels_its_unfinished_steps_with_the_runs_reason(tenant, make_job):
    now = timezone.now()
    job = _workflow_job(make_job, tenant, now)
    run = Run.objects.get(job=job)

    runs.cancel_run(run_id=run.pk, now=now, reason="run cancelled by ada")

    assert set(_states(job).values()) == {"CANCELLED"}
    messages = set(
        ExecutionEvent.objects.filter(execution__run=run, to_state="CANCELLED").values_list("message", flat=True)
    )
    assert messages == {"run cancelled by ada"}
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"
    assert run_state((e.state, e.attempt) for e in _steps(job).values()) == "CANCELLED"


def test_a_step_runs_with_its_own_retry_policy(tenant, make_job):
    now = timezone.now()
    workflow = {
        "steps": [
            {
                "name": "only",
                "target": {"pool": "default", "handler": "noop"},
                "payload": {},
                "depends_on": [],
                "retry_policy": {
                    "max_attempts": 1,
                    "backoff": "FIXED",
                    "initial_delay_ms": 0,
                    "max_delay_ms": 0,
                    "jitter": False,
                },
            }
        ]
    }
    job = _workflow_job(make_job, tenant, now, workflow=workflow, max_attempts=5)
    claim(now)

    _fail_dead(_steps(job)["only"].pk, now)  # the job's 5 attempts do not apply: the step's 1 does


def test_a_batch_of_successes_releases_downstream_steps_in_its_own_transaction(tenant, make_job):
    now = timezone.now()
    job = _workflow_job(make_job, tenant, now)
    steps = _steps(job)
    claim(now)
    _run_step(steps["a"].pk, now)
    claim(now)
    rows = [start(steps[name].pk, now=now) for name in ("b", "c")]
    successes = [Success(row.pk, row.lease_token, {}, now, run_id=row.run_id) for row in rows]

    recorded = transitions.succeed_many(successes, now=now)

    assert recorded == {str(steps["b"].pk), str(steps["c"].pk)}
    assert _states(job)["d"] == "PENDING"


def test_deleting_the_job_cancels_its_blocked_steps_as_the_jobs(tenant, make_job):
    from scheduling.job_changes import job_cancel

    now = timezone.now()
    job = _workflow_job(make_job, tenant, now)

    job_cancel(job=job, now=now)

    assert set(_states(job).values()) == {"CANCELLED"}
    messages = set(
        ExecutionEvent.objects.filter(execution__job=job, to_state="CANCELLED").values_list("message", flat=True)
    )
    assert messages == {"job cancelled"}


def test_a_step_whose_upstream_step_failed_cannot_be_re_driven_before_it(tenant, make_job):
    now = timezone.now()
    job = _workflow_job(make_job, tenant, now, max_attempts=1)
    steps = _steps(job)
    claim(now)
    _run_step(steps["a"].pk, now)
    claim(now)
    _fail_dead(steps["b"].pk, now)

    with pytest.raises(InvalidTransition, match=r"step 'd' waits for 'b' \(DEAD\), 'c' \(QUEUED\); re-drive that"):
        execution_redrive(execution=Execution.objects.get(pk=steps["d"].pk), now=now)

    assert _states(job)["d"] == "CANCELLED"
