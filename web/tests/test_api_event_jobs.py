"""EVENT jobs through the job API: `on` and `filter` are their timing; no time fires them, so
they start with no execution (events/ starts their runs)."""

import pytest

from executions.models import Execution

pytestmark = pytest.mark.django_db

BODY = {
    "name": "on paid",
    "type": "EVENT",
    "on": "invoice.paid",
    "filter": {"currency": "EUR"},
    "target": {"handler": "noop"},
}


def test_an_event_job_is_created_with_no_execution_and_no_next_fire(api):
    response = api.post("/v1/jobs", BODY, format="json")

    assert response.status_code == 201, response.content
    job = response.json()
    assert (job["on"], job["filter"], job["nextFireAt"], job["state"]) == (
        "invoice.paid",
        {"currency": "EUR"},
        None,
        "ACTIVE",
    )
    assert not Execution.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**BODY, "on": ""}, "on"),
        ({k: v for k, v in BODY.items() if k != "on"}, "on"),
        ({**BODY, "on": "bad name!"}, "on"),
        ({**BODY, "filter": {"nested": {"a": 1}}}, "filter"),
        ({**BODY, "filter": [1]}, "filter"),
        ({**BODY, "schedule": "* * * * *"}, "schedule"),
        ({**BODY, "type": "ONCE", "runAt": "2030-01-01T00:00:00Z"}, "on"),
    ],
)
def test_a_bad_event_job_answers_400_naming_the_field(api, body, field):
    response = api.post("/v1/jobs", body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()


def test_an_event_job_keeps_running_after_its_runs_end(api, tenant):
    from executions.clock import db_now
    from jobs.models import Job
    from scheduling import runs
    from testing.steps import claim, start, succeed

    job = Job.objects.get(pk=api.post("/v1/jobs", BODY, format="json").json()["jobId"])
    now = db_now()
    execution = runs.fire(job=job, scheduled_for=now, now=now, origin="EVENT").executions[0]
    claim(now)
    start(execution.pk, now=now)
    succeed(execution.pk, now=now)

    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"  # not COMPLETED: the next event runs it again


def test_a_debounced_event_job_says_its_window_and_changes_it(api):
    response = api.post("/v1/jobs", {**BODY, "debounceSec": 3, "debounceMaxSec": 30}, format="json")

    assert response.status_code == 201, response.content
    job = response.json()
    assert (job["debounceSec"], job["debounceMaxSec"]) == (3, 30)
    changed = api.patch(f"/v1/jobs/{job['jobId']}", {"debounceMaxSec": None}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["debounceSec"], changed.json()["debounceMaxSec"]) == (3, None)
    plain = api.post("/v1/jobs", BODY, format="json").json()
    assert (plain["debounceSec"], plain["debounceMaxSec"]) == (None, None)


FLOW = {"name": "flow", "type": "EVENT", "on": "invoice.paid", "workflow": {"steps": [
    {"name": "only", "target": {"handler": "noop"}}]}}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**BODY, "debounceSec": 0}, "debounceSec"),
        ({**BODY, "debounceSec": -1}, "debounceSec"),
        ({**BODY, "debounceSec": "soon"}, "debounceSec"),
        ({**BODY, "debounceSec": 1.5}, "debounceSec"),
        ({**BODY, "debounceSec": 7 * 86400 + 1}, "debounceSec"),
        ({**BODY, "debounceMaxSec": 10}, "debounceMaxSec"),
        ({**BODY, "debounceSec": 10, "debounceMaxSec": 5}, "debounceMaxSec"),
        ({**FLOW, "debounceSec": 3}, "debounceSec"),
        (
            {
                "name": "n",
                "type": "ONCE",
                "runAt": "2030-01-01T00:00:00Z",
                "target": {"handler": "noop"},
                "debounceSec": 3,
            },
            "debounceSec",
        ),
        (
            {"name": "n", "type": "CRON", "schedule": "* * * * *", "target": {"handler": "noop"}, "debounceMaxSec": 3},
            "debounceMaxSec",
        ),
    ],
)
def test_a_bad_debounce_answers_400_naming_the_field_and_writes_nothing(api, body, field):
    from jobs.models import Job

    response = api.post("/v1/jobs", body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not Job.objects.exists()


def test_an_update_keeps_the_debounce_rules(api):
    job = api.post("/v1/jobs", {**BODY, "debounceSec": 10}, format="json").json()

    shorter = api.patch(f"/v1/jobs/{job['jobId']}", {"debounceMaxSec": 5}, format="json")
    orphan = api.patch(f"/v1/jobs/{job['jobId']}", {"debounceSec": None, "debounceMaxSec": 20}, format="json")

    assert shorter.status_code == 400 and "debounceMaxSec" in shorter.json()
    assert orphan.status_code == 400 and "debounceMaxSec" in orphan.json()
