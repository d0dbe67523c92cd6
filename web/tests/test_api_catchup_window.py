"""`catchupWindowSec` and `concurrencyPolicy` `BUFFER_ONE` through the API. CRON and INTERVAL jobs
take a window (a positive whole number of seconds, or null: no window), every other type is
refused it with a 400 naming the field; it is part of the definition (PATCH sets and clears it,
versions record it) and the resume dry run says it and counts by it. BUFFER_ONE is a policy of
recurring jobs. The rules themselves are jobs/tests/test_misfire.py's and test_overlap.py's; that
the dispatcher applies them, dispatcher/tests/test_resume_preview.py's and test_buffer_one.py's."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from scheduling.job_changes import job_pause

pytestmark = pytest.mark.django_db


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def create(api, **fields):
    body = {"name": "every 10 min", "type": "CRON", "schedule": "*/10 * * * *", "target": {"handler": "noop"}}
    return api.post("/v1/jobs", {**body, **fields}, format="json")


def test_a_cron_job_takes_a_window_and_answers_it(api):
    response = create(api, catchupWindowSec=900)
    assert response.status_code == 201, response.json()
    assert response.json()["catchupWindowSec"] == 900
    assert Job.objects.get(pk=response.json()["jobId"]).catchup_window_sec == 900
    assert api.get(f"/v1/jobs/{response.json()['jobId']}").json()["catchupWindowSec"] == 900


def test_an_interval_job_takes_one_too_and_absent_is_null(api):
    body = {"name": "every 90 s", "type": "INTERVAL", "everySec": 90, "target": {"handler": "noop"}}
    assert api.post("/v1/jobs", {**body, "catchupWindowSec": 60}, format="json").json()["catchupWindowSec"] == 60
    assert api.post("/v1/jobs", body, format="json").json()["catchupWindowSec"] is None
    assert create(api, catchupWindowSec=None).json()["catchupWindowSec"] is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "Ensure this value is greater than or equal to 1."),
        (0, "Ensure this value is greater than or equal to 1."),
        (1.5, "A valid integer is required."),
        ("soon", "A valid integer is required."),
        (True, "A valid integer is required."),
        (10 * 365 * 86400 + 1, "Ensure this value is less than or equal to 315360000."),
    ],
)
def test_a_bad_window_is_a_400_naming_the_field(api, value, message):
    response = create(api, catchupWindowSec=value)
    assert response.status_code == 400
    assert response.json()["catchupWindowSec"] == [message]
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "ONCE", "runAt": "2031-01-01T00:00:00Z"},
        {"type": "DELAYED", "delaySec": 60},
        {"type": "EVENT", "on": "order.paid"},
    ],
    ids=["ONCE", "DELAYED", "EVENT"],
)
def test_a_window_on_a_job_that_does_not_recur_is_a_400_naming_the_field(api, fields):
    body = {"name": "x", "target": {"handler": "noop"}, "catchupWindowSec": 60, **fields}
    response = api.post("/v1/jobs", body, format="json")
    assert response.status_code == 400
    assert response.json()["catchupWindowSec"] == [f"is only used by CRON and INTERVAL jobs, not {fields['type']}"]


def test_patch_sets_and_clears_the_window_and_versions_record_it(api):
    job_id = create(api).json()["jobId"]
    patched = api.patch(f"/v1/jobs/{job_id}", {"catchupWindowSec": 300}, format="json")
    assert patched.status_code == 200 and patched.json()["catchupWindowSec"] == 300
    cleared = api.patch(f"/v1/jobs/{job_id}", {"catchupWindowSec": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["catchupWindowSec"] is None
    bad = api.patch(f"/v1/jobs/{job_id}", {"catchupWindowSec": -5}, format="json")
    assert bad.status_code == 400 and "catchupWindowSec" in bad.json()
    versions = api.get(f"/v1/jobs/{job_id}/versions").json()["results"]
    changes = {(c["field"], c["from"], c["to"]) for v in versions for c in v["changes"]}
    assert ("catchupWindowSec", None, 300) in changes and ("catchupWindowSec", 300, None) in changes


def test_the_resume_dry_run_says_the_window_and_skips_by_it(api, tenant, make_job):
    """Paused an hour over `*/10` with RUN_ALL and a 25-minute window: the fires more than 25
    minutes old are listed as skipped."""
    now = timezone.now()
    job = make_job(
        tenant,
        type="CRON",
        schedule="*/10 * * * *",
        misfire_policy="RUN_ALL",
        catchup_window_sec=1500,
        now=now - timedelta(hours=1),
    )
    job_pause(job=job, now=now - timedelta(hours=1))
    body = api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true").json()
    assert body["catchupWindowSec"] == 1500
    assert body["wouldRunCount"] + body["wouldSkipCount"] == 6
    assert body["wouldSkipCount"] >= 3
    for fire in body["wouldSkip"]:
        assert datetime.fromisoformat(fire) < now - timedelta(seconds=1500) + timedelta(seconds=5)


# --- concurrencyPolicy BUFFER_ONE (its rules: jobs/tests/test_overlap.py, dispatcher/tests/test_buffer_one.py) ---


def test_buffer_one_is_a_concurrency_policy_of_recurring_jobs(api):
    made = create(api, concurrencyPolicy="BUFFER_ONE")
    assert made.status_code == 201 and made.json()["concurrencyPolicy"] == "BUFFER_ONE"
    interval = {"name": "i", "type": "INTERVAL", "everySec": 1, "target": {"handler": "noop"}}
    assert api.post("/v1/jobs", {**interval, "concurrencyPolicy": "BUFFER_ONE"}, format="json").status_code == 201
    job_id = made.json()["jobId"]
    patched = api.patch(f"/v1/jobs/{job_id}", {"concurrencyPolicy": "FORBID"}, format="json")
    assert patched.status_code == 200 and patched.json()["concurrencyPolicy"] == "FORBID"


@pytest.mark.parametrize(
    "fields",
    [{"type": "ONCE", "runAt": "2031-01-01T00:00:00Z"}, {"type": "EVENT", "on": "order.paid"}],
    ids=["ONCE", "EVENT"],
)
def test_buffer_one_on_a_job_that_does_not_recur_is_a_400_naming_the_field(api, fields):
    body = {"name": "x", "target": {"handler": "noop"}, "concurrencyPolicy": "BUFFER_ONE", **fields}
    response = api.post("/v1/jobs", body, format="json")
    assert response.status_code == 400
    assert response.json()["concurrencyPolicy"] == [
        f"BUFFER_ONE is only used by CRON and INTERVAL jobs, not {fields['type']}"
    ]


def test_an_unknown_policy_is_a_400_that_lists_buffer_one(api):
    response = create(api, concurrencyPolicy="BUFFER_TWO")
    assert response.status_code == 400
    assert "BUFFER_ONE" in response.json()["concurrencyPolicy"][0]
