"""The served schema is one the ecosystem's tools take (issue 33): valid OpenAPI 3.0 for
openapi-spec-validator, and shaped for a generated client: names that vary by server are strings,
answers use the enums requests use, every operation is named for what it does and says so, and
every documented status has its body. (tests_schema/test_generated_client.py generates the client
and drives it.)"""

import collections
from typing import Any

import pytest
from openapi_spec_validator import OpenAPIV30SpecValidator, validate

from web.audit import AuditedApi

pytestmark = pytest.mark.django_db

METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture
def schema(client) -> dict[str, Any]:
    response = client.get("/v1/schema?format=json")
    assert response.status_code == 200
    return response.json()


def _operations(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method in METHODS:
                yield path, method, operation


def _properties(node, name: str):
    """Every schema of a property or a parameter called `name`, wherever it is."""
    if isinstance(node, dict):
        if node.get("name") == name and "schema" in node:
            yield node["schema"]
        if isinstance(node.get("properties"), dict) and name in node["properties"]:
            yield node["properties"][name]
        for value in node.values():
            yield from _properties(value, name)
    elif isinstance(node, list):
        for value in node:
            yield from _properties(value, name)


def _enum_of(schema, property_schema) -> str | None:
    """The enum component a property's schema refers to (directly, or as its allOf's one)."""
    ref = property_schema.get("$ref") or next((p["$ref"] for p in property_schema.get("allOf", [])), None)
    if ref is None:
        return None
    name = ref.rsplit("/", 1)[1]
    return name if "enum" in schema["components"]["schemas"][name] else None


def test_the_served_schema_is_valid_openapi_3_0(schema):
    """openapi-spec-validator refused it: `filter`'s values were typed as a list of types, which
    is OpenAPI 3.1's JSON Schema in a document that says 3.0.3."""
    assert schema["openapi"] == "3.0.3"

    validate(schema, cls=OpenAPIV30SpecValidator)


def test_names_that_differ_between_servers_are_strings_not_enums(schema):
    """The handlers and pools of the server that served it, and its tz database's 599 zones
    (among them GMT0, GMT+0 and GMT-0, which crashed openapi-python-client), were enums: a client
    built against one server did not fit another. Their valid values are the server's to say."""
    for name in ("handler", "pool", "timezone"):
        found = list(_properties(schema, name))
        assert found, name
        assert all("enum" not in found_schema for found_schema in found), name
    assert not {"HandlerEnum", "PoolEnum", "TimezoneEnum"} & set(schema["components"]["schemas"])
    target = schema["components"]["schemas"]["TargetRequest"]["properties"]
    assert "GET /v1/handlers" in target["handler"]["description"]
    assert "GET /v1/pools" in target["pool"]["description"]
    update = schema["components"]["schemas"]["PatchedJobUpdateRequest"]["properties"]
    assert "IANA" in update["timezone"]["description"]


@pytest.mark.parametrize(
    ("component", "field", "enum"),
    [
        ("JobOutput", "type", "JobTypeEnum"),
        ("JobOutput", "state", "JobStateEnum"),
        ("JobOutput", "priority", "PriorityEnum"),
        ("JobOutput", "misfirePolicy", "MisfirePolicyEnum"),
        ("JobOutput", "concurrencyPolicy", "ConcurrencyPolicyEnum"),
        ("RetryPolicyOutput", "backoff", "BackoffEnum"),
        ("ResumePreview", "state", "JobStateEnum"),
        ("ResumePreview", "misfirePolicy", "MisfirePolicyEnum"),
        ("VersionDefinition", "type", "JobTypeEnum"),
        ("VersionDefinition", "priority", "PriorityEnum"),
        ("Execution", "state", "ExecutionStateEnum"),
        ("ExecutionEvent", "from", "ExecutionStateEnum"),
        ("ExecutionEvent", "to", "ExecutionStateEnum"),
        ("RunStep", "state", "ExecutionStateEnum"),
        ("Run", "origin", "OriginEnum"),
        ("Notification", "type", "ChannelTypeEnum"),
        # The requests' side of the same fields.
        ("PatchedJobUpdateRequest", "type", "JobTypeEnum"),
        ("PatchedJobUpdateRequest", "priority", "PriorityEnum"),
        ("PatchedJobUpdateRequest", "misfirePolicy", "MisfirePolicyEnum"),
        ("PatchedJobUpdateRequest", "concurrencyPolicy", "ConcurrencyPolicyEnum"),
        ("RetryPolicyRequest", "backoff", "BackoffEnum"),
        ("JobOnceTargetRequest", "type", "JobTypeEnum"),
        ("JobCronWorkflowRequest", "type", "JobTypeEnum"),
    ],
)
def test_answers_and_requests_share_one_enum_per_set_of_choices(schema, component, field, enum):
    """An answer's `type`, `state`, `priority`, … were plain strings while the requests' were
    enums, so a client compared its answers with strings; now both refer to one component."""
    assert _enum_of(schema, schema["components"]["schemas"][component]["properties"][field]) == enum


def test_no_two_enum_components_hold_the_same_choices(schema):
    components = schema["components"]["schemas"]
    enums = collections.defaultdict(list)
    for name, component in components.items():
        if "enum" in component:
            enums[frozenset(component["enum"])].append(name)

    assert [names for names in enums.values() if len(names) > 1] == []


def test_a_lists_filter_is_the_enum_its_answers_carry(schema):
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/v1/jobs"]["get"]["parameters"]}

    assert parameters["state"]["items"] == {"$ref": "#/components/schemas/JobStateEnum"}
    assert parameters["type"]["items"] == {"$ref": "#/components/schemas/JobTypeEnum"}


def test_every_operation_has_a_summary_and_a_description_of_its_own(schema):
    """Ten operations were described by a mixin's docstring ("A mixin for an APIView …") and ten
    not at all; none had a summary."""
    summaries, descriptions = collections.Counter(), collections.Counter()
    for path, method, operation in _operations(schema):
        assert operation.get("summary", "").strip(), (method, path)
        assert operation.get("description", "").strip(), (method, path)
        summaries[operation["summary"]] += 1
        descriptions[operation["description"]] += 1
    mixin = " ".join(AuditedApi.__doc__.split())

    assert [summary for summary, count in summaries.items() if count > 1] == []
    assert [description for description, count in descriptions.items() if count > 1] == []
    assert all(mixin not in " ".join(description.split()) for description in descriptions)


def test_operation_ids_say_what_the_operations_do(schema):
    """GET /v1/pools was `pools_retrieve` and GET /v1/dead-letter/groups
    `dead_letter_groups_retrieve`, though each answers a list; every action was `…_create`."""
    ids = {(method, path): operation["operationId"] for path, method, operation in _operations(schema)}
    for (method, path), operation_id in ids.items():
        answer = schema["paths"][path][method]["responses"].get("200", {})
        body = answer.get("content", {}).get("application/json", {}).get("schema", {})
        page = schema["components"]["schemas"].get(body.get("$ref", "").rsplit("/", 1)[-1], {})
        if method == "get" and page.get("properties", {}).get("results", {}).get("type") == "array":
            assert operation_id.endswith("_list"), (method, path, operation_id)
        action = path.rsplit("/", 1)[1]
        if method == "post" and action in ("pause", "resume", "trigger", "cancel", "retry", "restore", "discard"):
            assert operation_id.endswith(f"_{action}"), (method, path, operation_id)
    assert len(set(ids.values())) == len(ids)
    assert ids[("get", "/v1/pools")] == "pools_list"
    assert ids[("get", "/v1/dead-letter/groups")] == "dead_letter_groups_list"
    assert ids[("post", "/v1/jobs/{job_id}/pause")] == "jobs_pause"
    assert ids[("delete", "/v1/jobs/{job_id}")] == "jobs_cancel"
    assert ids[("post", "/v1/hooks/{tenant}/{event_name}")] == "hooks_post_event"


def test_every_documented_status_has_its_body(schema):
    """The pools' pause and resume declared their 400, 403 and 404 without a body, so a generated
    client dropped the message."""
    bodiless = [
        (method, path, status)
        for path, method, operation in _operations(schema)
        for status, response in operation["responses"].items()
        if status != "204" and not response.get("content")
    ]

    assert bodiless == []
