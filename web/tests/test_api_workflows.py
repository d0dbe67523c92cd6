"""Workflow jobs through the API: the `workflow` field's validation (each 400 names the field),
runs and their steps (`GET /v1/runs/{id}`, `GET /v1/jobs/{id}/runs`, `POST /v1/runs/{id}/cancel`),
`runId` and `step` on executions, and tenant isolation on each."""

import pytest

from executions.models import Execution, Run
from jobs.models import Job

pytestmark = pytest.mark.django_db


def _step(name, *depends, **extra):
    return {"name": name, "target": {"handler": "noop"}, "dependsOn": list(depends), **extra}


def _job(steps, **fields):
    return {"name": "nightly-etl", "type": "DELAYED", "delaySec": 3600, "workflow": {"steps": steps}, **fields}


DIAMOND = [
    _step("extract", payload={"day": 1}),
    _step("clean", "extract"),
    _step("enrich", "extract"),
    _step("load", "clean", "enrich"),
]


def test_a_workflow_job_is_created_with_a_run_of_its_steps(api):
    response = api.post("/v1/jobs", _job(DIAMOND), format="json")

    assert response.status_code == 201, response.content
    job = response.json()
    assert job["target"] is None
    assert [s["name"] for s in job["workflow"]["steps"]] == ["extract", "clean", "enrich", "load"]
    assert job["workflow"]["steps"][0]["target"] == {"pool": "default", "handler": "noop"}
    executions = api.get(f"/v1/jobs/{job['jobId']}/executions").json()["results"]
    assert {e["step"]: e["state"] for e in executions} == {
        "extract": "PENDING",
        "clean": "BLOCKED",
        "enrich": "BLOCKED",
        "load": "BLOCKED",
    }
    run_id = executions[0]["runId"]
    assert {e["runId"] for e in executions} == {run_id}

    run = api.get(f"/v1/runs/{run_id}").json()

    # Due in an hour, no step has begun: PENDING, not RUNNING (issue 31, item 3).
    assert run["runId"] == run_id and run["jobId"] == job["jobId"] and run["state"] == "PENDING"
    assert [(s["step"], s["state"], s["dependsOn"]) for s in run["steps"]] == [
        ("extract", "PENDING", []),
        ("clean", "BLOCKED", ["extract"]),
        ("enrich", "BLOCKED", ["extract"]),
        ("load", "BLOCKED", ["clean", "enrich"]),
    ]
    runs = api.get(f"/v1/jobs/{job['jobId']}/runs").json()
    assert [r["runId"] for r in runs["results"]] == [run_id]


def test_a_cron_workflows_run_for_tomorrow_is_pending_not_running(api):
    """Issue 31, item 3: a cron workflow job's run scheduled for tomorrow 02:00Z was listed
    RUNNING with 0 of its 4 steps. Until a step begins it is PENDING, in the run and in the job's
    runs; the schema's enum of run states says PENDING."""
    body = _job(DIAMOND, type="CRON", schedule="0 2 * * *", timezone="UTC")
    del body["delaySec"]
    job = api.post("/v1/jobs", body, format="json").json()

    (listed,) = api.get(f"/v1/jobs/{job['jobId']}/runs").json()["results"]
    run = api.get(f"/v1/runs/{listed['runId']}").json()

    assert (listed["state"], run["state"]) == ("PENDING", "PENDING")
    assert run["scheduledFor"].endswith("T02:00:00Z")
    assert {s["state"] for s in run["steps"]} == {"PENDING", "BLOCKED"}
    schema = api.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert "PENDING" in schema["components"]["schemas"]["RunStateEnum"]["enum"]


def test_a_plain_jobs_execution_has_no_run_or_step(api):
    job = api.post(
        "/v1/jobs", {"name": "x", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}, format="json"
    ).json()

    execution = api.get(f"/v1/jobs/{job['jobId']}/executions").json()["results"][0]

    assert execution["runId"] is None and execution["step"] is None
    assert job["workflow"] is None and job["target"] == {"pool": "default", "handler": "noop"}


@pytest.mark.parametrize(
    ("steps", "field_path", "words"),
    [
        ([_step("a", "b"), _step("b", "c"), _step("c", "a")], ["workflow", "steps"], "cycle: a -> b -> c -> a"),
        ([_step("a"), _step("a")], ["workflow", "steps"], "used twice"),
        ([_step("a", "ghost")], ["workflow", "steps"], "'ghost', which is not a step"),
        ([_step("a", "a")], ["workflow", "steps"], "depends on itself"),
        ([_step(f"s{i}") for i in range(101)], ["workflow", "steps"], "no more than 100"),
        ([], ["workflow", "steps"], "at least 1"),
        ([{"name": "a", "target": {"handler": "nope"}}], ["workflow", "steps", "0", "target", "handler"], "unknown"),
        ([{"name": "a", "target": {"handler": "noop"}, "extra": 1}], ["workflow", "steps", "0", "extra"], "unknown"),
        ([{"name": "a b", "target": {"handler": "noop"}}], ["workflow", "steps", "0", "name"], ""),
        ([_step("a", payload=[1])], ["workflow", "steps", "0", "payload"], "object"),
        ([_step("a", timeoutSec=0)], ["workflow", "steps", "0", "timeoutSec"], ""),
    ],
)
def test_a_bad_workflow_answers_400_naming_the_field_and_creates_nothing(api, steps, field_path, words):
    response = api.post("/v1/jobs", _job(steps), format="json")

    assert response.status_code == 400, response.content
    errors = response.json()
    for name in field_path:
        errors = errors[int(name)] if isinstance(errors, list) else errors[name]
    assert words in str(errors), errors
    assert not Run.objects.exists() and not Execution.objects.exists()


def test_a_job_gives_a_target_or_a_workflow_not_both_nor_neither(api):
    both = api.post("/v1/jobs", _job(DIAMOND, target={"handler": "noop"}), format="json")
    neither = api.post("/v1/jobs", {"name": "x", "type": "DELAYED", "delaySec": 1}, format="json")
    payload = api.post("/v1/jobs", _job(DIAMOND, payload={"a": 1}), format="json")

    assert both.status_code == 400 and "workflow" in both.json()
    assert neither.status_code == 400 and "target" in neither.json()
    assert payload.status_code == 400 and "payload" in payload.json()


def test_a_workflow_job_stays_one_and_a_plain_one_cannot_become_one(api):
    flow = api.post("/v1/jobs", _job(DIAMOND), format="json").json()
    plain = api.post(
        "/v1/jobs", {"name": "x", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}, format="json"
    ).json()

    to_plain = api.patch(f"/v1/jobs/{flow['jobId']}", {"target": {"handler": "noop"}}, format="json")
    to_flow = api.patch(f"/v1/jobs/{plain['jobId']}", {"workflow": {"steps": DIAMOND}}, format="json")

    assert to_plain.status_code == 400 and "target" in to_plain.json()
    assert to_flow.status_code == 400 and "workflow" in to_flow.json()


def test_changing_the_workflow_remakes_the_run_that_has_not_begun(api):
    job = api.post("/v1/jobs", _job(DIAMOND), format="json").json()
    before = Run.objects.get()

    response = api.patch(f"/v1/jobs/{job['jobId']}", {"workflow": {"steps": [_step("only")]}}, format="json")

    assert response.status_code == 200, response.content
    run = Run.objects.get()
    assert run.pk != before.pk and run.scheduled_for == before.scheduled_for
    assert list(Execution.objects.values_list("step", flat=True)) == ["only"]
    versions = api.get(f"/v1/jobs/{job['jobId']}/versions").json()["results"]
    assert versions[0]["changes"][0]["field"] == "workflow"


def test_cancelling_a_run_cancels_its_steps(api):
    job = api.post("/v1/jobs", _job(DIAMOND), format="json").json()
    run_id = Run.objects.get().pk

    response = api.post(f"/v1/runs/{run_id}/cancel")

    assert response.status_code == 202
    body = response.json()
    assert body["state"] == "CANCELLED" and {s["state"] for s in body["steps"]} == {"CANCELLED"}
    assert api.get(f"/v1/jobs/{job['jobId']}").json()["state"] == "COMPLETED"


def test_a_triggered_workflow_job_starts_another_run(api):
    job = api.post("/v1/jobs", _job(DIAMOND), format="json").json()

    execution = api.post(f"/v1/jobs/{job['jobId']}/trigger").json()

    assert execution["step"] == "extract" and execution["origin"] == "TRIGGER"
    runs = api.get(f"/v1/jobs/{job['jobId']}/runs").json()["results"]
    assert len(runs) == 2 and runs[0]["runId"] == execution["runId"]


def test_runs_are_the_tenants_own(api, other_api):
    job = api.post("/v1/jobs", _job(DIAMOND), format="json").json()
    run_id = Run.objects.get().pk

    assert other_api.get(f"/v1/runs/{run_id}").status_code == 404
    assert other_api.post(f"/v1/runs/{run_id}/cancel").status_code == 404
    assert other_api.get(f"/v1/jobs/{job['jobId']}/runs").status_code == 404
    assert api.get("/v1/runs/not-a-uuid").status_code == 404
    assert Execution.objects.filter(state="CANCELLED").count() == 0


def test_a_runs_steps_are_listed_by_run_id_and_the_job_says_its_last_runs_state(api):
    job = api.post("/v1/jobs", _job(DIAMOND), format="json").json()
    run_id = str(Run.objects.get().pk)

    steps = api.get(f"/v1/executions?runId={run_id}").json()["results"]
    detail = api.get(f"/v1/jobs/{job['jobId']}").json()

    assert sorted(e["step"] for e in steps) == ["clean", "enrich", "extract", "load"]
    assert detail["lastRunState"] is None  # no step of its first run has begun
    api.post(f"/v1/runs/{run_id}/cancel")
    assert api.get(f"/v1/jobs/{job['jobId']}").json()["lastRunState"] == "CANCELLED"
    assert api.get("/v1/executions?runId=").status_code == 400


def test_an_update_may_give_part_of_a_steps_retry_policy(api):
    """Schemathesis found a PUT whose step named part of its policy answering 500 (DRF applies no
    nested defaults to a partial update): the rest is the job's when a run is made."""
    job = api.post("/v1/jobs", _job(DIAMOND), format="json").json()
    steps = [_step("only", retryPolicy={"maxAttempts": 2})]

    response = api.patch(f"/v1/jobs/{job['jobId']}", {"workflow": {"steps": steps}}, format="json")

    assert response.status_code == 200, response.content
    run = Run.objects.get()
    assert run.steps[0]["retry_policy"]["max_attempts"] == 2  # a run keeps its steps in the model's names
    assert run.steps[0]["retry_policy"]["initial_delay_ms"] == 1000  # the job's


def test_a_workflow_is_shown_in_the_apis_names_by_the_job_its_versions_and_a_restore(api):
    """A job keeps its steps in the model's names (jobs/workflow.py): the answer, its versions'
    definitions and changes, and a restore of a version all speak the API's."""
    first = [_step("a", payload={"dependsOn": "a payload's own key"})]
    job_id = api.post("/v1/jobs", _job(first), format="json").json()["jobId"]
    policy = {"maxAttempts": 2, "initialDelayMs": 5}
    second = [*first, _step("b", "a", retryPolicy=policy, timeoutSec=9)]

    updated = api.patch(f"/v1/jobs/{job_id}", {"workflow": {"steps": second}}, format="json")

    assert updated.status_code == 200, updated.content
    shown = updated.json()["workflow"]["steps"]
    assert shown[0] == {**first[0], "target": {"pool": "default", "handler": "noop"}}
    assert shown[1] == {**second[1], "target": {"pool": "default", "handler": "noop"}, "payload": {}}
    assert api.get(f"/v1/jobs/{job_id}").json()["workflow"]["steps"] == shown
    newest, oldest = api.get(f"/v1/jobs/{job_id}/versions").json()["results"]
    assert newest["definition"]["workflow"]["steps"] == shown
    assert oldest["definition"]["workflow"]["steps"] == shown[:1]
    assert newest["changes"] == [{"field": "workflow", "from": {"steps": shown[:1]}, "to": {"steps": shown}}]

    restored = api.post(f"/v1/jobs/{job_id}/versions/1/restore")

    assert restored.status_code == 200, restored.content
    assert restored.json()["job"]["workflow"]["steps"] == shown[:1]
    assert Job.objects.get(pk=job_id).workflow["steps"][0]["depends_on"] == []
