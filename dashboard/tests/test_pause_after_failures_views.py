"""pauseAfterFailures on the dashboard: the job form sets, changes and clears it (validated by the
API's serializer, so a bad value or a one-off job's is the API's field error); the job page says
how many failed fires pause the job and, once the system paused it, why; the page's resume and the
jobs page's bulk resume clear the reason."""

import pytest

from dashboard.jobs.forms import initial_values
from dashboard.tests.test_views import _job_form
from executions.models import Execution
from executions.states import ExecutionState as S
from jobs.models import Job

pytestmark = pytest.mark.django_db


def _interval(**overrides) -> dict:
    return _job_form(**{"type": "INTERVAL", "everySec": "60", "startAt": "", "runAt": "", **overrides})


def test_the_form_sets_changes_and_clears_it(member_client, tenant):
    member_client.post("/dashboard/jobs/new", _interval(pauseAfterFailures="3"))
    job = Job.objects.get()
    assert job.pause_after_failures == 3
    form = member_client.get(f"/dashboard/jobs/{job.pk}/edit").content.decode()
    assert 'name="pauseAfterFailures" value="3"' in form

    member_client.post(f"/dashboard/jobs/{job.pk}/edit", _interval(pauseAfterFailures="5", startAt=form_start(job)))
    assert Job.objects.get(pk=job.pk).pause_after_failures == 5
    member_client.post(f"/dashboard/jobs/{job.pk}/edit", _interval(pauseAfterFailures="", startAt=form_start(job)))
    assert Job.objects.get(pk=job.pk).pause_after_failures is None


def form_start(job: Job) -> str:
    return initial_values(job)["startAt"]  # as the edit form shows it: unchanged, not sent


def test_the_form_shows_the_apis_errors_for_it(member_client):
    zero = member_client.post("/dashboard/jobs/new", _interval(pauseAfterFailures="0")).content.decode()
    once = member_client.post("/dashboard/jobs/new", _job_form(pauseAfterFailures="2")).content.decode()

    assert 'data-error-for="pauseAfterFailures"' in zero
    assert 'data-error-for="pauseAfterFailures"' in once and "only used by CRON and INTERVAL jobs" in once
    assert not Job.objects.exists()


def _auto_paused(make_job, tenant, drive) -> Job:
    job = make_job(tenant, type="INTERVAL", every_sec=60, pause_after_failures=2)
    Job.objects.filter(pk=job.pk).update(failed_fires=1)
    drive(Execution.objects.get(job=job), S.DEAD)
    return Job.objects.get(pk=job.pk)


def test_the_job_page_says_why_the_system_paused_it_until_resumed(member_client, tenant, make_job, drive):
    job = _auto_paused(make_job, tenant, drive)
    page = f"/dashboard/jobs/{job.pk}/"

    paused = member_client.get(page).content.decode()
    member_client.post(f"/dashboard/jobs/{job.pk}/resume")
    resumed = member_client.get(page).content.decode()

    assert 'data-testid="paused-reason"' in paused and "paused after 2 consecutive failed fires" in paused
    assert "2 failed fires in a row (now 2)" in paused
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"
    assert 'data-testid="paused-reason"' not in resumed and "(now 0)" in resumed


def test_a_bulk_resume_clears_the_reason(member_client, tenant, make_job, drive):
    job = _auto_paused(make_job, tenant, drive)

    member_client.post("/dashboard/jobs/bulk", {"action": "resume", "ids": [str(job.pk)]})

    resumed = Job.objects.get(pk=job.pk)
    assert (resumed.state, resumed.paused_reason, resumed.failed_fires) == ("ACTIVE", "", 0)
