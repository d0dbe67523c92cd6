"""Tenant quotas enforced at submission."""

import pytest
from django.core.cache import cache

from executions.models import Execution
from jobs.models import Job

BODY = {"name": "q", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


def test_max_active_jobs_answers_429_and_creates_nothing(api, tenant):
    """With maxActiveJobs 2, the third active job is refused with 429 naming the limit."""
    tenant.max_active_jobs = 2
    tenant.save()
    assert api.post("/v1/jobs", BODY, format="json").status_code == 201
    assert api.post("/v1/jobs", BODY, format="json").status_code == 201

    response = api.post("/v1/jobs", BODY, format="json")

    assert response.status_code == 429
    assert "limit of 2 active jobs" in response.json()["detail"]
    assert Job.objects.count() == 2 and Execution.objects.count() == 2


def test_cancelled_jobs_do_not_count_against_max_active_jobs(api, tenant):
    """Cancelling a job frees its slot."""
    tenant.max_active_jobs = 1
    tenant.save()
    job_id = api.post("/v1/jobs", BODY, format="json").json()["jobId"]
    api.delete(f"/v1/jobs/{job_id}")

    assert api.post("/v1/jobs", BODY, format="json").status_code == 201


def test_submit_rate_per_minute_answers_429_past_the_rate(api, tenant):
    """With a rate of 3 per minute, the fourth submission in the minute is refused."""
    tenant.submit_rate_per_minute = 3
    tenant.save()
    codes = [api.post("/v1/jobs", BODY, format="json").status_code for _ in range(4)]

    assert codes == [201, 201, 201, 429]
    assert Job.objects.count() == 3


def test_idempotent_replay_is_not_refused_by_the_rate(api, tenant):
    """A replay of an accepted request returns its job even when the rate is used up."""
    tenant.submit_rate_per_minute = 1
    tenant.save()
    first = api.post("/v1/jobs", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k")

    again = api.post("/v1/jobs", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k")

    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["jobId"] == first.json()["jobId"]
