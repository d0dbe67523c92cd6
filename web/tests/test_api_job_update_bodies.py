"""Any body sent to PUT or PATCH /v1/jobs/{id}, for a job of any type, is a 200 or a 400 naming a
field of that body; never a 500 (issue 31, item 4).

The 500s had one cause: an update is validated as DRF's partial update (what is not given stays as
it is), and DRF passes that down to every nested field, so a `workflow`, which an update replaces
whole, was read as a fragment: a step without its name or target, or a workflow without steps,
reached code that needs them (KeyError). And a null timing field of another type was written
through: `{"runAt": null}` blanked a DELAYED job's computed time (ValueError: no first fire)."""

import pytest

pytestmark = pytest.mark.django_db

STEP = {"name": "only", "target": {"handler": "noop"}}
JOBS = {
    "ONCE": {"type": "ONCE", "runAt": "2031-01-01T00:00:00Z", "target": {"handler": "noop"}},
    "DELAYED": {"type": "DELAYED", "delaySec": 3600, "target": {"handler": "noop"}},
    "CRON": {"type": "CRON", "schedule": "0 2 * * *", "target": {"handler": "noop"}},
    "INTERVAL": {"type": "INTERVAL", "everySec": 600, "target": {"handler": "noop"}},
    "EVENT": {"type": "EVENT", "on": "invoice.paid", "target": {"handler": "noop"}},
    "CRON workflow": {"type": "CRON", "schedule": "0 2 * * *", "workflow": {"steps": [STEP]}},
    "ONCE workflow": {"type": "ONCE", "runAt": "2031-01-01T00:00:00Z", "workflow": {"steps": [STEP]}},
    "INTERVAL workflow": {"type": "INTERVAL", "everySec": 600, "workflow": {"steps": [STEP]}},
    "EVENT workflow": {"type": "EVENT", "on": "invoice.paid", "workflow": {"steps": [STEP]}},
}
# The issue's body: a cron job's update into a cron workflow, with a step that names no target.
ISSUE_BODY = {
    "type": "CRON",
    "schedule": "* * * * *",
    "timezone": "GB",
    "target": {"handler": "fail"},
    "workflow": {"steps": [{"name": "0", "dependsOn": [], "payload": {}, "retryPolicy": {}, "timeoutSec": 1}]},
    "on": "0",
    "filter": {},
}
BODIES = [
    ISSUE_BODY,
    {"workflow": {"steps": [{"name": "0", "dependsOn": [], "payload": {}, "retryPolicy": {}, "timeoutSec": 1}]}},
    {"workflow": {"steps": [{"target": {"handler": "noop"}}]}},
    {"workflow": {"steps": [{"name": "a", "target": {}}]}},
    {"workflow": {"steps": [{"name": "a", "target": {"pool": "default"}}]}},
    {"workflow": {"steps": [{}]}},
    {"workflow": {}},
    {"workflow": {"steps": [STEP, {"target": {"handler": "noop"}, "dependsOn": ["only"]}]}},
    {"runAt": None},
    {"delaySec": None},
    {"schedule": ""},
    {"everySec": None},
    {"startAt": None},
    {"runAt": None, "delaySec": None, "schedule": "", "everySec": None, "startAt": None},
    {"filter": None},
    {"target": {}},
    {"target": {"pool": "default"}},
    {"retryPolicy": {}},
    {"retryPolicy": {"maxDelayMs": 0}},
]


@pytest.mark.parametrize("method", ["put", "patch"])
@pytest.mark.parametrize("kind", list(JOBS))
def test_an_update_of_any_job_answers_200_or_a_400_naming_a_field_of_its_body(api, kind, method):
    job = api.post("/v1/jobs", {"name": kind, **JOBS[kind]}, format="json").json()
    path = f"/v1/jobs/{job['jobId']}"

    for body in BODIES:
        response = getattr(api, method)(path, body, format="json")

        assert response.status_code in (200, 400), (body, response.status_code, response.content[:500])
        if response.status_code == 400:
            named = set(response.json()) - {"code", "detail"}
            assert named and named <= set(body), (body, response.json())
        after = api.get(path).json()
        # Whatever was refused or changed, the job still says when (or on what) it fires.
        assert after["runAt"] or after["schedule"] or after["everySec"] or after["on"], (body, after)


def test_the_issues_body_is_a_400_naming_a_field(api):
    job = api.post("/v1/jobs", {"name": "x", **JOBS["CRON"]}, format="json").json()

    response = api.patch(f"/v1/jobs/{job['jobId']}", ISSUE_BODY, format="json")

    assert response.status_code == 400, response.content
    assert set(response.json()) & set(ISSUE_BODY), response.json()


@pytest.mark.parametrize(
    ("step", "field"),
    [
        ({"name": "a"}, "target"),
        ({"target": {"handler": "noop"}}, "name"),
        ({"name": "a", "target": {"pool": "default"}}, "handler"),
    ],
)
def test_a_workflows_step_in_an_update_is_checked_whole_as_in_a_create(api, step, field):
    """A step's target names its handler, on an update as on a create: not the job's."""
    job = api.post("/v1/jobs", {"name": "w", **JOBS["CRON workflow"]}, format="json").json()

    created = api.post("/v1/jobs", {"name": "w", **JOBS["CRON workflow"], "workflow": {"steps": [step]}}, format="json")
    updated = api.patch(f"/v1/jobs/{job['jobId']}", {"workflow": {"steps": [step]}}, format="json")

    assert updated.status_code == 400, updated.content
    assert field in str(updated.json()["workflow"]), updated.json()
    assert created.status_code == 400 and field in str(created.json()["workflow"]), created.json()


def test_a_null_run_at_leaves_a_delayed_jobs_time_as_it_was(api):
    job = api.post("/v1/jobs", {"name": "d", **JOBS["DELAYED"]}, format="json").json()

    response = api.patch(f"/v1/jobs/{job['jobId']}", {"runAt": None}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["runAt"] == job["runAt"] and response.json()["nextFireAt"] == job["nextFireAt"]


def test_a_steps_retry_policy_keeps_what_it_names_on_a_create_as_on_an_update(api):
    """What a step's policy does not name is its job's when a run is made, whether the step came
    with the job's create or with an update."""
    policy = {"maxAttempts": 7, "backoff": "FIXED", "initialDelayMs": 5000, "maxDelayMs": 9000, "jitter": False}
    step = {**STEP, "retryPolicy": {"maxAttempts": 2}}
    body = {"name": "w", **JOBS["CRON workflow"], "retryPolicy": policy, "workflow": {"steps": [step]}}

    created = api.post("/v1/jobs", body, format="json").json()
    updated = api.patch(f"/v1/jobs/{created['jobId']}", {"workflow": {"steps": [step]}}, format="json").json()

    assert created["workflow"]["steps"][0]["retryPolicy"] == {"maxAttempts": 2}
    assert updated["workflow"]["steps"][0]["retryPolicy"] == {"maxAttempts": 2}
