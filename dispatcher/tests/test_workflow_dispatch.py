"""A cron workflow job through the dispatcher, time injected: each fire is one run, made once;
the misfire and concurrency policies apply to the run as a whole (a FORBID fire while the last
run is still going skips every step of it, and nothing of it is published)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution, ExecutionEvent, Run
from testing.steps import claim, start, succeed

pytestmark = pytest.mark.django_db

STEPS = [
    {"name": "first", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []},
    {"name": "second", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["first"]},
]


def _cron_workflow(make_job, tenant, now, **fields):
    return make_job(
        tenant, type="CRON", schedule="*/5 * * * *", workflow={"steps": STEPS}, pool="", handler="", now=now, **fields
    )


def _run_at(job, fire) -> Run:
    return Run.objects.get(job=job, scheduled_for=fire)


def _states(run) -> dict[str, str]:
    return dict(Execution.objects.filter(run=run).values_list("step", "state"))


def test_each_fire_is_one_run_made_once_and_forbid_skips_a_whole_run_while_the_last_one_runs(tenant, make_job):
    now = timezone.now().replace(second=0, microsecond=0)
    job = _cron_workflow(make_job, tenant, now, concurrency_policy="FORBID")
    fire1 = job.next_fire_at
    fire2, fire3 = fire1 + timedelta(minutes=5), fire1 + timedelta(minutes=10)

    published = claim(fire1)
    claim(fire1)  # a second look at the same moment makes nothing more

    run1 = _run_at(job, fire1)
    assert [d.execution_id for d in published] == [str(Execution.objects.get(run=run1, step="first").pk)]
    assert Run.objects.filter(job=job, scheduled_for=fire2).count() == 1
    assert Run.objects.filter(job=job).count() == 2
    job.refresh_from_db()
    assert job.next_fire_at == fire2
    first = start(Execution.objects.get(run=run1, step="first").pk, now=fire1)

    assert claim(fire2) == []  # run 1 still going: run 2 is skipped whole, nothing published

    run2 = _run_at(job, fire2)
    assert _states(run2) == {"first": "CANCELLED", "second": "CANCELLED"}
    skipped = ExecutionEvent.objects.filter(execution__run=run2, to_state="CANCELLED").values_list("message", flat=True)
    assert set(skipped) == {"skipped: the previous run is still active (concurrencyPolicy FORBID)"}
    assert Run.objects.filter(job=job, scheduled_for=fire3).count() == 1  # the schedule goes on

    succeed(first.pk, now=fire2)
    claim(fire2)
    second = start(Execution.objects.get(run=run1, step="second").pk, now=fire2)
    succeed(second.pk, now=fire2)
    assert _states(run1) == {"first": "SUCCEEDED", "second": "SUCCEEDED"}

    assert len(claim(fire3)) == 1  # run 1 is over: run 3 runs
    assert _states(_run_at(job, fire3))["first"] == "QUEUED"


def test_a_missed_fire_under_skip_cancels_the_whole_run_and_the_next_one_is_ahead(tenant, make_job):
    now = timezone.now().replace(second=0, microsecond=0)
    job = _cron_workflow(make_job, tenant, now, misfire_policy="SKIP")
    fire1 = job.next_fire_at
    late = fire1 + timedelta(minutes=12)

    assert claim(late) == []

    assert _states(_run_at(job, fire1)) == {"first": "CANCELLED", "second": "CANCELLED"}
    job.refresh_from_db()
    assert job.next_fire_at == fire1 + timedelta(minutes=15)  # the first fire after `late`
    assert Run.objects.filter(job=job).count() == 2


def test_replace_cancels_the_runs_still_going_for_the_new_one(tenant, make_job):
    now = timezone.now().replace(second=0, microsecond=0)
    job = _cron_workflow(make_job, tenant, now, concurrency_policy="REPLACE")
    fire1 = job.next_fire_at
    fire2 = fire1 + timedelta(minutes=5)
    claim(fire1)
    run1 = _run_at(job, fire1)

    claim(fire2)

    assert _states(run1) == {"first": "CANCELLED", "second": "CANCELLED"}  # first was QUEUED, never started
    assert _states(_run_at(job, fire2)) == {"first": "QUEUED", "second": "BLOCKED"}


def test_a_trigger_runs_beside_a_scheduled_run_under_forbid(tenant, make_job):
    """As for a plain cron job, FORBID is the schedule's policy: "run now" is asked for and runs."""
    from scheduling.job_changes import job_trigger

    now = timezone.now().replace(second=0, microsecond=0)
    job = _cron_workflow(make_job, tenant, now, concurrency_policy="FORBID")
    fire1 = job.next_fire_at
    claim(fire1)
    start(Execution.objects.get(run=_run_at(job, fire1), step="first").pk, now=fire1)

    triggered = job_trigger(job=job, now=fire1)
    assert len(claim(fire1)) == 1

    assert _states(triggered.run) == {"first": "QUEUED", "second": "BLOCKED"}
