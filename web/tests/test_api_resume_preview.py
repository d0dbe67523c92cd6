"""POST /v1/jobs/{id}/resume?dryRun=true: what resume would run and skip under the job's misfire
policy, answered without changing anything (no state, no execution, no wake-up)."""

from datetime import datetime, timedelta

import pytest
import yaml
from django.utils import timezone

from executions.models import Execution, ExecutionEvent
from jobs.models import Job
from store import store

pytestmark = pytest.mark.django_db

PREVIEW_FIELDS = {
    "dryRun",
    "jobId",
    "state",
    "misfirePolicy",
    "misfireGraceSec",
    "catchupWindowSec",
    "at",
    "wouldRun",
    "wouldRunCount",
    "wouldSkip",
    "wouldSkipCount",
    "countsCapped",
    "nextFireAt",
}


@pytest.fixture
def notified(monkeypatch) -> list[datetime]:
    """Every wake-up sent to the dispatchers (NOTIFY on PostgreSQL)."""
    sent: list[datetime] = []
    original = type(store()).notify_due

    def record(self, due):
        sent.append(due)
        original(self, due)

    monkeypatch.setattr(type(store()), "notify_due", record)
    return sent


def paused_for_an_hour(api, tenant, make_job, policy: str) -> Job:
    created = timezone.now() - timedelta(hours=1)
    job = make_job(tenant, type="CRON", schedule="*/10 * * * *", misfire_policy=policy, now=created)
    assert api.post(f"/v1/jobs/{job.pk}/pause").status_code == 200
    return job


def state_of(job: Job) -> tuple:
    executions = Execution.objects.filter(job=job).order_by("id").values_list("id", "state", "updated_at")
    events = ExecutionEvent.objects.filter(execution__job=job).count()
    return Job.objects.filter(pk=job.pk).values_list("state", "updated_at").get(), list(executions), events


def test_dry_run_answers_what_would_run_and_changes_nothing(api, tenant, make_job, notified):
    """RUN_ONCE paused for an hour: one catch-up run (the pending fire), the other missed fires
    skipped, the next fire after now left pending; the job stays PAUSED, its executions and
    their history as they were, and no dispatcher is woken."""
    job = paused_for_an_hour(api, tenant, make_job, "RUN_ONCE")
    pending = Execution.objects.get(job=job).scheduled_for
    before = state_of(job)
    notified.clear()  # the create's own wake-up

    response = api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true")

    assert response.status_code == 200, response.content
    data = response.json()
    assert set(data) == PREVIEW_FIELDS
    assert data["dryRun"] is True and data["state"] == "PAUSED" and data["jobId"] == str(job.pk)
    assert data["misfirePolicy"] == "RUN_ONCE"
    assert [datetime.fromisoformat(t) for t in data["wouldRun"]] == [pending]
    assert data["wouldRunCount"] == 1 and data["wouldSkipCount"] == len(data["wouldSkip"]) >= 4
    assert all(t.endswith("Z") for t in data["wouldRun"] + data["wouldSkip"])
    assert datetime.fromisoformat(data["nextFireAt"]) > datetime.fromisoformat(data["at"])
    assert data["countsCapped"] is False
    assert state_of(job) == before
    assert notified == []

    resumed = api.post(f"/v1/jobs/{job.pk}/resume")  # the real thing does wake the dispatchers
    assert resumed.json()["state"] == "ACTIVE" and len(notified) == 1


@pytest.mark.parametrize(("policy", "runs"), [("RUN_ALL", 6), ("SKIP", 0)])
def test_dry_run_under_the_other_policies(api, tenant, make_job, policy, runs):
    job = paused_for_an_hour(api, tenant, make_job, policy)
    data = api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true").json()
    assert data["misfirePolicy"] == policy
    assert data["wouldRunCount"] + data["wouldSkipCount"] == 6
    assert data["wouldRunCount"] == runs


def test_dry_run_false_resumes(api, tenant, make_job):
    job = paused_for_an_hour(api, tenant, make_job, "RUN_ONCE")
    response = api.post(f"/v1/jobs/{job.pk}/resume?dryRun=false")
    assert response.status_code == 200 and response.json()["state"] == "ACTIVE"


def test_dry_run_of_a_job_that_is_not_paused_answers_409_as_resume_does(api, tenant, make_job):
    job = make_job(tenant, type="CRON")
    dry = api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true")
    real = api.post(f"/v1/jobs/{job.pk}/resume")
    assert dry.status_code == real.status_code == 409
    assert dry.json() == real.json()


@pytest.mark.parametrize("flag", ["perhaps", ""])
def test_dry_run_with_a_bad_flag_answers_400_naming_it(api, tenant, make_job, flag):
    """`?dryRun=` (present, empty) is no boolean either: it must not resume for real (schemathesis)."""
    job = paused_for_an_hour(api, tenant, make_job, "RUN_ONCE")
    response = api.post(f"/v1/jobs/{job.pk}/resume?dryRun={flag}")
    assert response.status_code == 400 and "dryRun" in response.json()
    assert Job.objects.get(pk=job.pk).state == "PAUSED"


def test_dry_run_of_another_tenants_job_is_404(api, other_api, tenant, make_job):
    job = paused_for_an_hour(api, tenant, make_job, "RUN_ONCE")
    assert other_api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true").status_code == 404


def test_schema_describes_the_dry_run(client):
    schema = yaml.safe_load(client.get("/v1/schema").content)
    resume = schema["paths"]["/v1/jobs/{job_id}/resume"]["post"]
    parameters = {p["name"]: p for p in resume["parameters"]}
    assert parameters["dryRun"]["in"] == "query" and parameters["dryRun"]["schema"]["type"] == "boolean"
    body = resume["responses"]["200"]["content"]["application/json"]["schema"]
    result = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    refs = {ref["$ref"].rsplit("/", 1)[1] for ref in result["oneOf"]}
    assert refs == {"JobOutput", "ResumePreview"}
    assert set(schema["components"]["schemas"]["ResumePreview"]["properties"]) == PREVIEW_FIELDS


def test_schema_documents_the_400_of_a_bad_dry_run_flag(client):
    schema = yaml.safe_load(client.get("/v1/schema").content)
    assert "400" in schema["paths"]["/v1/jobs/{job_id}/resume"]["post"]["responses"]
