"""The job resource's last run (lastRunState, lastRunAt, on the list and the detail) and the
failing filter (GET /v1/jobs?failing=true): a one-off whose run failed reads as failed."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from executions.states import ExecutionState as S
from jobs.models import JobType

pytestmark = pytest.mark.django_db


def _iso(at) -> str:
    return at.isoformat().replace("+00:00", "Z")


def test_a_one_off_whose_run_failed_is_completed_with_a_failed_last_run(api, tenant, make_job, drive):
    job = make_job(tenant, name="import", handler="fail", run_at=timezone.now() - timedelta(seconds=1))
    dead = drive(job.executions.get(), S.DEAD)

    detail = api.get(f"/v1/jobs/{job.pk}").json()
    listed = api.get("/v1/jobs").json()["results"]

    assert (detail["state"], detail["lastRunState"]) == ("COMPLETED", "FAILED")
    assert detail["lastRunAt"] == _iso(dead.finished_at)
    assert [(j["jobId"], j["lastRunState"], j["lastRunAt"]) for j in listed] == [
        (str(job.pk), "FAILED", _iso(dead.finished_at))
    ]


def test_the_last_run_before_it_begins_is_null_and_then_follows_it(api, tenant, make_job, drive):
    job = make_job(tenant)
    assert api.get(f"/v1/jobs/{job.pk}").json()[("lastRunState")] is None
    running = drive(job.executions.get(), S.RUNNING)
    detail = api.get(f"/v1/jobs/{job.pk}").json()
    assert (detail["lastRunState"], detail["lastRunAt"]) == ("RUNNING", _iso(running.started_at))


def test_failing_lists_the_jobs_whose_last_run_failed(api, other_api, tenant, other_tenant, make_job, drive):
    """A cron job's next fire, waiting, does not hide the failure of its last run; a job whose
    failure was followed by a success is not failing; another tenant's failing jobs are not listed."""
    now = timezone.now()
    once = make_job(tenant, name="once", handler="fail")
    drive(once.executions.get(), S.DEAD)
    cron = make_job(tenant, name="cron", type=JobType.CRON, schedule="* * * * *")
    drive(cron.executions.get(), S.DEAD)
    Execution.objects.create(
        job=cron,
        tenant=tenant,
        pool="default",
        scheduled_for=now + timedelta(minutes=1),
        available_at=now + timedelta(minutes=1),
    )
    recovered = make_job(tenant, name="recovered", type=JobType.CRON, schedule="* * * * *")
    drive(recovered.executions.get(), S.DEAD)
    later = Execution.objects.create(
        job=recovered,
        tenant=tenant,
        pool="default",
        scheduled_for=now + timedelta(minutes=2),
        available_at=now + timedelta(minutes=2),
    )
    drive(later, S.SUCCEEDED)
    fine = make_job(tenant, name="fine")
    drive(fine.executions.get(), S.SUCCEEDED)
    theirs = make_job(other_tenant, name="theirs", handler="fail")
    drive(theirs.executions.get(), S.DEAD)

    failing = api.get("/v1/jobs?failing=true").json()["results"]
    others = api.get("/v1/jobs?failing=false").json()["results"]

    assert sorted(j["name"] for j in failing) == ["cron", "once"]
    assert {j["lastRunState"] for j in failing} == {"FAILED"}
    assert sorted(j["name"] for j in others) == ["fine", "recovered"]
    assert [j["name"] for j in other_api.get("/v1/jobs?failing=true").json()["results"]] == ["theirs"]


def test_a_discarded_run_still_failed(api, tenant, make_job, drive):
    from scheduling.execution_changes import executions_discard

    job = make_job(tenant, handler="fail")
    executions_discard(executions=[drive(job.executions.get(), S.DEAD)], now=timezone.now(), reason="seen")
    assert api.get(f"/v1/jobs/{job.pk}").json()["lastRunState"] == "FAILED"
    assert [j["jobId"] for j in api.get("/v1/jobs?failing=true").json()["results"]] == [str(job.pk)]


def test_a_bad_failing_value_is_a_400_naming_the_field(api):
    response = api.get("/v1/jobs?failing=perhaps")
    assert response.status_code == 400
    assert "failing" in response.json()


def test_the_list_reads_last_runs_for_the_page_at_once(api, tenant, make_job, drive, django_assert_max_num_queries):
    for n in range(12):
        drive(make_job(tenant, name=f"j{n}", handler="fail").executions.get(), S.DEAD)
    with django_assert_max_num_queries(8):
        assert len(api.get("/v1/jobs").json()["results"]) == 12
