"""Issue 33: the schema documents the error once (the `Error` component, web/errors.py's shape) and
every operation's error statuses refer to it; the job operations that honour If-Match say so, with
their 412; the answers' headers are documented (web/schema_conventions.py)."""

import pytest

pytestmark = pytest.mark.django_db

ERROR_REF = {"$ref": "#/components/schemas/Error"}


@pytest.fixture
def schema(client) -> dict:
    return client.get("/v1/schema?format=json").json()


def _operations(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield path, method, operation


def test_the_error_is_one_component_with_its_code_and_detail(schema):
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["code", "detail"]
    assert error["additionalProperties"] is True  # an invalid request's fields, by name
    for code in ("invalid", "not_found", "precondition_failed", "rate_limited", "unavailable", "server_error"):
        assert f"`{code}`" in error["properties"]["code"]["description"]
    assert error["properties"]["errors"]["items"]["required"] == ["index"]  # a bulk request's invalid jobs


def test_every_error_status_of_every_operation_refers_to_it(schema):
    """An error status with no body (the pool actions' 400, 403 and 404) or a body of its own (the
    bulk create's 400) was another shape, or none, for a client."""
    seen = 0
    for path, method, operation in _operations(schema):
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                assert response["content"] == {"application/json": {"schema": ERROR_REF}}, (path, method, status)
                seen += 1
    assert seen > 100


def test_every_answer_documents_its_request_id(schema):
    for path, method, operation in _operations(schema):
        for status, response in operation["responses"].items():
            assert "X-Request-Id" in response["headers"], (path, method, status)


def test_the_job_operations_that_honour_if_match_say_so(schema):
    honour = {
        ("/v1/jobs/{job_id}", "put"),
        ("/v1/jobs/{job_id}", "patch"),
        ("/v1/jobs/{job_id}", "delete"),
        ("/v1/jobs/{job_id}/pause", "post"),
        ("/v1/jobs/{job_id}/resume", "post"),
    }
    for path, method, operation in _operations(schema):
        names = {parameter["name"] for parameter in operation.get("parameters", [])}
        assert ("If-Match" in names) == ((path, method) in honour), (path, method)
        assert ("412" in operation["responses"]) == ((path, method) in honour), (path, method)
    job = schema["paths"]["/v1/jobs/{job_id}"]
    assert "ETag" in job["get"]["responses"]["200"]["headers"]
    assert "ETag" in job["patch"]["responses"]["412"]["headers"]


def test_creates_document_location_and_the_rate_limit(schema):
    for path, method, operation in _operations(schema):
        if "201" in operation["responses"]:
            assert "Location" in operation["responses"]["201"]["headers"], (path, method)
    create = schema["paths"]["/v1/jobs"]["post"]["responses"]
    for status in ("201", "429"):
        assert {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} <= create[status]["headers"].keys()
    assert "Retry-After" in create["429"]["headers"]
    assert "415" in create  # a body of another type


def test_what_the_conventions_add_is_valid_openapi(client):
    """The paths with their parameters, responses and headers, and the Error component, pass
    openapi-spec-validator (the other components' bodies are stubbed: their schemas are the
    serializers', held to OpenAPI by the schema's own tests)."""
    validator = pytest.importorskip("openapi_spec_validator")
    import yaml

    document = yaml.safe_load(client.get("/v1/schema").content)
    schemas = document["components"]["schemas"]
    document["components"]["schemas"] = {name: {"type": "object"} for name in schemas} | {"Error": schemas["Error"]}
    validator.validate(document)
