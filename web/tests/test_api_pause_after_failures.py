"""pauseAfterFailures through the API: CRON and INTERVAL jobs take a whole number from 1 (null:
never); any other value, or any value on another type, is a 400 naming the field. A job the system
paused says why in `pausedReason` (null otherwise), and a resume clears it. The counting itself is
executions/tests/test_pause_after_failures.py's; a real run, tests_e2e/test_e2e_pause_after_failures.py."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from executions.states import ExecutionState as S
from jobs.models import Job

pytestmark = pytest.mark.django_db

TIMING = {
    "INTERVAL": {"everySec": 60},
    "CRON": {"schedule": "*/5 * * * *"},
    "ONCE": {"runAt": "2031-01-01T00:00:00Z"},
    "DELAYED": {"delaySec": 60},
    "EVENT": {"on": "paid"},
}


def create(api, kind: str = "INTERVAL", **fields):
    body = {"name": "flaky", "type": kind, **TIMING[kind], "target": {"handler": "noop"}, **fields}
    return api.post("/v1/jobs", body, format="json")


@pytest.mark.parametrize("kind", ["CRON", "INTERVAL"])
def test_a_recurring_job_takes_pause_after_failures_and_answers_it(api, kind):
    response = create(api, kind, pauseAfterFailures=3)

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["pauseAfterFailures"], body["pausedReason"]) == (3, None)
    assert Job.objects.get(pk=body["jobId"]).pause_after_failures == 3
    assert api.get(f"/v1/jobs/{body['jobId']}").json()["pauseAfterFailures"] == 3


def test_absent_or_null_is_never(api):
    assert create(api).json()["pauseAfterFailures"] is None
    assert create(api, pauseAfterFailures=None).json()["pauseAfterFailures"] is None


@pytest.mark.parametrize("value", [0, -1, 1001, "three", 2.5, True, "", [3]])
def test_anything_but_a_whole_number_from_1_is_a_400_naming_the_field(api, value):
    response = create(api, pauseAfterFailures=value)

    assert response.status_code == 400, response.json()
    assert "pauseAfterFailures" in response.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize("kind", ["ONCE", "DELAYED", "EVENT"])
def test_a_one_off_or_event_job_cannot_have_it(api, kind):
    response = create(api, kind, pauseAfterFailures=3)

    assert response.status_code == 400
    assert response.json()["pauseAfterFailures"] == [f"is only used by CRON and INTERVAL jobs, not {kind}"]
    assert not Job.objects.exists()


def test_a_patch_sets_changes_and_clears_it_and_its_version_says_so(api):
    job_id = create(api).json()["jobId"]

    assert api.patch(f"/v1/jobs/{job_id}", {"pauseAfterFailures": 5}, format="json").json()["pauseAfterFailures"] == 5
    bad = api.patch(f"/v1/jobs/{job_id}", {"pauseAfterFailures": 0}, format="json")
    cleared = api.patch(f"/v1/jobs/{job_id}", {"pauseAfterFailures": None}, format="json")

    assert bad.status_code == 400 and "pauseAfterFailures" in bad.json()
    assert cleared.json()["pauseAfterFailures"] is None
    versions = api.get(f"/v1/jobs/{job_id}/versions").json()["results"]
    assert "pauseAfterFailures" in str(versions[0])


def test_restoring_a_version_without_it_unsets_it(api):
    """Version 1 never paused (its definition does not hold the field): restored, nor does the job."""
    job_id = create(api).json()["jobId"]
    api.patch(f"/v1/jobs/{job_id}", {"pauseAfterFailures": 4}, format="json")

    restored = api.post(f"/v1/jobs/{job_id}/versions/1/restore")

    assert restored.status_code == 200, restored.json()
    assert Job.objects.get(pk=job_id).pause_after_failures is None
    assert api.get(f"/v1/jobs/{job_id}/versions").json()["results"][0]["changes"] == [
        {"field": "pauseAfterFailures", "from": 4, "to": None}
    ]


def test_a_patch_of_a_one_off_job_cannot_set_it(api):
    job_id = create(api, "ONCE").json()["jobId"]

    response = api.patch(f"/v1/jobs/{job_id}", {"pauseAfterFailures": 2}, format="json")

    assert response.status_code == 400 and "pauseAfterFailures" in response.json()


def _auto_paused(api, drive) -> str:
    """An INTERVAL job with pauseAfterFailures 1 whose first fire ended DEAD: paused by the system."""
    job_id = create(api, startAt=(timezone.now() - timedelta(seconds=5)).isoformat()).json()["jobId"]
    api.patch(f"/v1/jobs/{job_id}", {"pauseAfterFailures": 1}, format="json")
    drive(Execution.objects.get(job_id=job_id), S.DEAD)
    return job_id


def test_a_job_the_system_paused_says_why_and_resume_clears_it(api, drive):
    job_id = _auto_paused(api, drive)

    paused = api.get(f"/v1/jobs/{job_id}").json()
    listed = api.get("/v1/jobs?state=PAUSED").json()["results"]
    resumed = api.post(f"/v1/jobs/{job_id}/resume")

    assert (paused["state"], paused["pausedReason"]) == ("PAUSED", "paused after 1 consecutive failed fire")
    assert [job["pausedReason"] for job in listed] == ["paused after 1 consecutive failed fire"]
    assert resumed.status_code == 200
    assert (resumed.json()["state"], resumed.json()["pausedReason"]) == ("ACTIVE", None)
    assert Job.objects.get(pk=job_id).failed_fires == 0


def test_a_job_paused_by_someone_has_no_reason(api):
    job_id = create(api).json()["jobId"]

    assert api.post(f"/v1/jobs/{job_id}/pause").json()["pausedReason"] is None
