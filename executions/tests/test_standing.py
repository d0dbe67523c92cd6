"""A one-off job's COMPLETED, read from its executions (executions/standing.py): never written,
the same whichever way it is read (a job alone, a page, a filter, a count)."""

import random
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Q

from executions import standing, transitions
from executions.models import Execution
from executions.states import ExecutionState as S
from jobs.models import Job
from jobs.states import JobState
from scheduling.execution_changes import execution_redrive
from scheduling.job_changes import job_cancel, job_pause, job_resume, job_trigger

pytestmark = pytest.mark.django_db


def _row(job: Job) -> dict:
    return Job.objects.values("state", "updated_at", "next_fire_at").get(pk=job.pk)


def test_a_one_off_reads_completed_once_its_run_ends_and_active_again_when_triggered(tenant, make_job, drive, now):
    job = make_job(tenant, run_at=now)
    stored = _row(job)
    assert Job.objects.get(pk=job.pk).standing == JobState.ACTIVE

    done = drive(job.executions.get(), "SUCCEEDED")

    ended = Job.objects.get(pk=job.pk)
    assert (ended.standing, ended.shown_next_fire_at, ended.shown_updated_at) == (
        JobState.COMPLETED,
        None,
        max(done.finished_at, ended.updated_at),
    )
    assert _row(job) == stored  # the end of its run wrote nothing of the job

    job_trigger(job=ended, now=now)
    assert Job.objects.get(pk=job.pk).standing == JobState.ACTIVE
    assert _row(job) == stored


def test_a_redrive_makes_a_completed_one_off_active_again(tenant, make_job, drive, now):
    job = make_job(tenant, run_at=now, max_attempts=1)
    dead = drive(job.executions.get(), "DEAD")
    assert Job.objects.get(pk=job.pk).standing == JobState.COMPLETED

    execution_redrive(execution=dead, now=now)

    assert Job.objects.get(pk=job.pk).standing == JobState.ACTIVE


def test_a_completed_one_off_neither_pauses_nor_cancels(tenant, make_job, drive, now):
    from jobs.states import InvalidJobTransition

    job = make_job(tenant, run_at=now)
    drive(job.executions.get(), "SUCCEEDED")

    for change in (job_pause, job_cancel):
        with pytest.raises(InvalidJobTransition) as refused:
            change(job=job, now=now)
        assert refused.value.current == JobState.COMPLETED
    assert Job.objects.get(pk=job.pk).state == "ACTIVE"


def test_a_paused_one_off_whose_run_ended_reads_completed_once_resumed(tenant, make_job, drive, now):
    """Paused while its run was under way: the run ends, the job stays PAUSED; resumed, it has
    nothing left to run (not ACTIVE for ever, as when COMPLETED was written only from ACTIVE)."""
    job = make_job(tenant, run_at=now)
    running = drive(job.executions.get(), "RUNNING")
    job_pause(job=job, now=now)
    assert transitions.succeed(execution_id=running.pk, lease_token=running.lease_token, now=now, result=None)
    assert Job.objects.get(pk=job.pk).standing == JobState.PAUSED

    job_resume(job=job, now=now)

    assert Job.objects.get(pk=job.pk).standing == JobState.COMPLETED


def test_a_page_reads_its_jobs_ends_in_one_statement(tenant, make_job, drive, now, django_assert_num_queries):
    jobs = [make_job(tenant, run_at=now) for _ in range(4)] + [make_job(tenant, type="CRON", schedule="0 * * * *")]
    drive(jobs[0].executions.get(), "SUCCEEDED")
    drive(jobs[1].executions.get(), "CANCELLED")
    drive(jobs[2].executions.get(), "RUNNING")
    page = list(Job.objects.filter(pk__in=[j.pk for j in jobs]))

    with django_assert_num_queries(1):
        standing.attach(page)
        shown = {job.pk: job.standing for job in page}

    assert [shown[j.pk] for j in jobs] == ["COMPLETED", "COMPLETED", "ACTIVE", "ACTIVE", "ACTIVE"]


def test_the_filters_and_counts_agree_with_each_jobs_own_reading(tenant, make_job, drive, now):
    """Jobs of each kind in states drawn at random: the filter by each state, the counts and each
    job read alone say the same."""
    rng = random.Random(36)
    for i in range(30):
        kind = rng.choice(["ONCE", "ONCE", "DELAYED", "CRON"])
        fields = {"schedule": "0 * * * *"} if kind == "CRON" else {"run_at": now, "delay_sec": 5}
        job = make_job(tenant, type=kind, name=f"job {i}", **fields)
        for execution in job.executions.all():
            end = rng.choice(["PENDING", "RUNNING", "SUCCEEDED", "CANCELLED", "DEAD"])
            if end != "PENDING":
                drive(execution, end)
        if rng.random() < 0.2:
            job_trigger(job=job, now=now + timedelta(seconds=i))
        if rng.random() < 0.15 and Job.objects.get(pk=job.pk).standing == JobState.ACTIVE:
            job_pause(job=job, now=now)

    alone = {job.pk: job.standing for job in Job.objects.all()}
    by_filter = {
        state: set(Job.objects.filter(standing.jobs_in([state])).values_list("pk", flat=True))
        for state in JobState.values
    }
    counted = standing.counts(Job.objects.all())

    for state in JobState.values:
        assert by_filter[state] == {pk for pk, shown in alone.items() if shown == state}, state
        assert counted[state] == len(by_filter[state]), state
    assert set(Job.objects.filter(standing.jobs_in(["ACTIVE", "PAUSED"])).values_list("pk", flat=True)) == (
        by_filter["ACTIVE"] | by_filter["PAUSED"]
    )
    assert standing.live_count(Job.objects.all()) == len(by_filter["ACTIVE"]) + len(by_filter["PAUSED"])
    assert Job.objects.filter(Q(state="COMPLETED")).count() == 0  # never stored


def test_completed_one_offs_leave_the_tenants_active_job_quota(tenant, make_job, drive, now):
    from scheduling.job_creation import QuotaExceeded

    tenant.max_active_jobs = 2
    tenant.save()
    first = make_job(tenant, run_at=now)
    make_job(tenant, run_at=now)
    with pytest.raises(QuotaExceeded), transaction.atomic():
        make_job(tenant, run_at=now)

    drive(first.executions.get(), "SUCCEEDED")

    make_job(tenant, run_at=now)
    assert Execution.objects.filter(job__tenant=tenant, state=S.PENDING).count() == 2
