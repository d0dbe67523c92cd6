"""The schema says what the API takes and links what it answers (issue 31, the schemathesis run):
a job's create body per type (web/job_schema.py), request examples the API accepts as they are
(web/api/examples.py), and links from each answer that names an object to the operations on it
(web/schema.py), which stateful testing follows."""

import pytest
from jsonschema import Draft4Validator

from web.api.examples import JOB_BODIES

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client) -> dict:
    return client.get("/v1/schema?format=json").json()


def _nullable(node):
    """OpenAPI 3.0's `nullable` as JSON Schema says it."""
    if isinstance(node, dict):
        node = {key: _nullable(value) for key, value in node.items()}
        if node.pop("nullable", False) and "type" in node:
            node["type"] = [node["type"], "null"]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = [*node["enum"], None]
        return node
    if isinstance(node, list):
        return [_nullable(value) for value in node]
    return node


def _validator(schema, component: str) -> Draft4Validator:
    return Draft4Validator({"$ref": f"#/components/schemas/{component}", "components": _nullable(schema["components"])})


def test_the_create_body_states_each_types_timing_and_a_target_or_a_workflow(schema):
    """The serializer's own schema let a ONCE job name a schedule, or a job give a target and a
    workflow, or neither: schemathesis's valid bodies were refused every time (and so it created
    no job to follow links from)."""
    body = _validator(schema, "JobInputRequest")
    once = {"name": "x", "type": "ONCE", "runAt": "2031-01-01T00:00:00Z", "target": {"handler": "noop"}}
    steps = {"steps": [{"name": "a", "target": {"handler": "noop"}}]}

    assert body.is_valid(once)
    assert body.is_valid({**once, "delaySec": None, "timezone": "UTC", "filter": {}})  # as the API takes them
    assert not body.is_valid({**once, "schedule": "* * * * *"})
    assert not body.is_valid({**once, "timezone": "Europe/London"})
    assert not body.is_valid({**once, "workflow": steps})
    assert not body.is_valid({key: value for key, value in once.items() if key != "target"})
    assert not body.is_valid({key: value for key, value in once.items() if key != "runAt"})
    assert body.is_valid({"name": "x", "type": "EVENT", "on": "a.b", "filter": {"k": 1}, "workflow": steps})
    assert not body.is_valid({"name": "x", "type": "EVENT", "on": "a.b", "workflow": steps, "payload": {}})


def test_an_updates_target_may_name_its_pool_alone_as_the_api_takes_it(schema, api):
    job = api.post("/v1/jobs", JOB_BODIES["A delayed job"], format="json").json()
    body = {"target": {"pool": "default"}}

    assert _validator(schema, "PatchedJobUpdateRequest").is_valid(body)
    assert api.patch(f"/v1/jobs/{job['jobId']}", body, format="json").status_code == 200
    assert not _validator(schema, "JobInputRequest").is_valid({**JOB_BODIES["A delayed job"], **body})


@pytest.mark.parametrize("name", list(JOB_BODIES))
def test_each_job_example_fits_the_schema_and_is_created(schema, api, name):
    assert _validator(schema, "JobInputRequest").is_valid(JOB_BODIES[name])

    response = api.post("/v1/jobs", JOB_BODIES[name], format="json")

    assert response.status_code == 201, response.content


def test_the_other_examples_are_accepted_as_they_are(schema, api):
    def example(path: str, method: str) -> dict:
        content = schema["paths"][path][method]["requestBody"]["content"]["application/json"]
        (only,) = content["examples"].values()
        return only["value"]

    job = api.post("/v1/jobs", JOB_BODIES["A workflow of steps"], format="json").json()
    rule = api.post("/v1/alerts/rules", example("/v1/alerts/rules", "post"), format="json")
    bulk = api.post("/v1/jobs/bulk", example("/v1/jobs/bulk", "post"), format="json")
    update = {
        method: getattr(api, method)(f"/v1/jobs/{job['jobId']}", example("/v1/jobs/{job_id}", method), format="json")
        for method in ("put", "patch")
    }
    preview = {
        p["name"]: p["example"] for p in schema["paths"]["/v1/schedule/preview"]["get"]["parameters"] if "example" in p
    }

    assert rule.status_code == 201, rule.content
    disabled = api.patch(
        f"/v1/alerts/rules/{rule.json()['ruleId']}", example("/v1/alerts/rules/{rule_id}", "patch"), format="json"
    )
    assert disabled.status_code == 200 and disabled.json()["enabled"] is False
    assert bulk.status_code == 201, bulk.content
    assert {method: response.status_code for method, response in update.items()} == {"put": 200, "patch": 200}
    assert api.get("/v1/schedule/preview", preview).status_code == 200


@pytest.mark.parametrize(
    ("path", "method", "status", "pointer", "target"),
    [
        ("/v1/jobs", "get", "200", "/results/0/jobId", "jobs_partial_update"),
        ("/v1/jobs", "post", "201", "/jobId", "jobs_trigger"),
        ("/v1/executions", "get", "200", "/results/0/executionId", "executions_retry"),
        ("/v1/jobs/{job_id}/runs", "get", "200", "/results/0/runId", "runs_cancel"),
        ("/v1/events", "post", "202", "/eventId", "events_retrieve"),
        ("/v1/alerts/rules", "get", "200", "/results/0/ruleId", "alerts_rules_destroy"),
        ("/v1/dead-letter/groups", "get", "200", "/results/0/fingerprint", "dead_letter_groups_retry"),
    ],
)
def test_an_answer_that_names_an_object_links_to_what_acts_on_it(schema, path, method, status, pointer, target):
    links = schema["paths"][path][method]["responses"][status]["links"]

    linked = {link["operationId"]: link["parameters"] for link in links.values()}
    assert target in linked and f"$response.body#{pointer}" in linked[target].values()
