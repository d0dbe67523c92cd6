"""Issue 33, one error shape (web/errors.py): every error under /v1/ is JSON with a machine-readable
`code` and a `detail` sentence, whoever answers it (a view, DRF, Django outside any view, the body
limit before Django), and an invalid request's fields keep their keys beside them."""

import asyncio
import io
import json

import pytest
from rest_framework.test import APIClient

from web.request_body import RequestBodyLimit, WSGIRequestBodyLimit

pytestmark = pytest.mark.django_db

JOB = {"name": "nightly", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}


def _assert_shaped(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"], body
    assert response["X-Request-Id"]
    return body


def _paused_job(api) -> str:
    job_id = api.post("/v1/jobs", JOB, format="json").json()["jobId"]
    api.post(f"/v1/jobs/{job_id}/pause")
    return job_id


def _server_error(api, monkeypatch):
    from web.api.executions import ExecutionListApi

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(ExecutionListApi, "get_queryset", broken)
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=api._credentials["HTTP_AUTHORIZATION"])
    return client.get("/v1/executions")


def _database_unavailable(api, monkeypatch):
    from django.db import OperationalError

    from web.api.executions import ExecutionListApi

    def full(*args, **kwargs):
        raise OperationalError("FATAL: sorry, too many clients already")

    monkeypatch.setattr(ExecutionListApi, "get_queryset", full)
    return api.get("/v1/executions")


def _rate_limited(api, tenant):
    tenant.submit_rate_per_minute = 1
    tenant.save()
    api.post("/v1/jobs", JOB, format="json")
    return api.post("/v1/jobs", JOB, format="json")


def _stale_if_match(api):
    job_id = api.post("/v1/jobs", JOB, format="json").json()["jobId"]
    return api.patch(f"/v1/jobs/{job_id}", {"name": "x"}, format="json", HTTP_IF_MATCH='"2"')


# Each status the API answers with an error, provoked as a client would (the 413 of the body
# limit below, before Django).
PROVOKED = {
    "400 invalid field": (400, "invalid", lambda api, **_: api.post("/v1/jobs", {**JOB, "nmae": 1}, format="json")),
    "400 malformed JSON": (
        400,
        "invalid",
        lambda api, **_: api.post("/v1/jobs", data=b'{"name": ', content_type="application/json"),
    ),
    "400 query parameter": (400, "invalid", lambda api, **_: api.get("/v1/jobs", {"state": "NOPE"})),
    "401 no token": (401, "unauthenticated", lambda api, **_: APIClient().get("/v1/jobs")),
    "401 wrong token": (
        401,
        "unauthenticated",
        lambda api, **_: APIClient(HTTP_AUTHORIZATION="Bearer tw_nope").get("/v1/jobs"),
    ),
    "403 not staff": (403, "permission_denied", lambda api, **_: api.post("/v1/pools/default/pause")),
    "404 no such job": (404, "not_found", lambda api, **_: api.get("/v1/jobs/nope")),
    "404 unknown path": (404, "not_found", lambda api, **_: api.get("/v1/nope")),
    "404 unknown path, no token": (404, "not_found", lambda api, **_: APIClient().delete("/v1/jobs/x/nope")),
    "404 trailing slash": (404, "not_found", lambda api, **_: api.get("/v1/jobs/")),
    "405": (405, "method_not_allowed", lambda api, **_: api.delete("/v1/jobs")),
    "406": (406, "not_acceptable", lambda api, **_: api.get("/v1/jobs", HTTP_ACCEPT="application/xml")),
    "409": (409, "conflict", lambda api, **_: api.post(f"/v1/jobs/{_paused_job(api)}/trigger")),
    "412": (412, "precondition_failed", lambda api, **_: _stale_if_match(api)),
    "415": (
        415,
        "unsupported_media_type",
        lambda api, **_: api.post("/v1/jobs", data="name=x", content_type="text/plain"),
    ),
    "429": (429, "rate_limited", lambda api, tenant, **_: _rate_limited(api, tenant)),
    "500": (500, "server_error", lambda api, monkeypatch, **_: _server_error(api, monkeypatch)),
    "503 database": (503, "unavailable", lambda api, monkeypatch, **_: _database_unavailable(api, monkeypatch)),
    "503 health": (503, "unavailable", lambda api, **_: APIClient().get("/v1/health")),
}


@pytest.mark.parametrize("case", PROVOKED)
def test_every_error_status_has_the_one_shape(api, tenant, monkeypatch, case):
    """Each error status answers JSON with its code and a detail sentence, and X-Request-Id."""
    status, code, provoke = PROVOKED[case]
    _assert_shaped(provoke(api, tenant=tenant, monkeypatch=monkeypatch), status, code)


def test_an_unknown_path_under_v1_is_json_and_elsewhere_django_s_page(api):
    """An unknown path under /v1/ was Django's HTML 404; it says where the endpoints are listed.
    Outside /v1/ the pages' 404 stays HTML."""
    body = _assert_shaped(api.get("/v1/jobz"), 404, "not_found")
    assert body == {"code": "not_found", "detail": "no such path: /v1/jobz; GET /v1/ lists the API's endpoints"}
    page = api.get("/dashboard/nope")
    assert page.status_code == 404 and not page["Content-Type"].startswith("application/json")


def test_field_errors_keep_their_keys_beside_code_and_detail(api):
    """The contract's field-keyed errors are kept as they were; the code and a detail that says the
    first of them are added beside them."""
    response = api.post("/v1/jobs", {**JOB, "payload": {"nmae": 1}, "target": {"handler": "sleep"}}, format="json")
    assert response.json() == {
        "payload": {"nmae": ["unknown field"]},
        "code": "invalid",
        "detail": "payload.nmae: unknown field",
    }
    response = api.post("/v1/jobs", {"type": "DELAYED", "delaySec": "x", "timeoutSec": "y"}, format="json")
    assert response.json() == {
        "name": ["This field is required."],
        "delaySec": ["A valid integer is required."],
        "timeoutSec": ["A valid integer is required."],
        "code": "invalid",
        "detail": "name: This field is required. (and 2 more)",
    }


def test_a_field_named_like_the_shape_s_own_keys_is_said_apart(api):
    """A body with an unknown field `code` or `detail` cannot take the shape's keys: its messages
    go to non_field_errors, named, as a bulk item's field named `index` does."""
    response = api.post("/v1/jobs", {**JOB, "code": 1, "detail": "x"}, format="json")
    assert response.json() == {
        "non_field_errors": ["code: unknown field", "detail: unknown field"],
        "code": "invalid",
        "detail": "code: unknown field (and 1 more)",
    }


def test_the_body_limit_s_refusals_have_the_shape_and_the_request_id(settings):
    """The 413 (and the 400 for a Content-Length that is no number) answered before Django, by
    the ASGI and the WSGI middleware, carry the shape and X-Request-Id, the caller's own if valid."""
    settings.TICKWORK_MAX_REQUEST_BYTES = 100
    given = "0b6c8c1e-55a4-4c2b-9f0a-3a1e9d2b7c41"

    async def app(scope, receive, send):
        raise AssertionError("the application is not reached")

    for length, status, code in ((b"101", 413, "payload_too_large"), (b"ten", 400, "invalid")):
        sent = []

        async def send(message, sent=sent):
            sent.append(message)

        headers = [(b"content-length", length), (b"x-request-id", given.encode())]
        scope = {"type": "http", "method": "POST", "path": "/v1/jobs", "headers": headers}
        asyncio.run(RequestBodyLimit(app)(scope, None, send))
        start, body = sent
        assert start["status"] == status
        assert (b"x-request-id", given.encode()) in start["headers"]
        assert json.loads(body["body"])["code"] == code

    answered = {}

    def start_response(status, headers):
        answered.update(status=status, headers=dict(headers))

    environ = {"CONTENT_LENGTH": "101", "wsgi.input": io.BytesIO(b""), "HTTP_X_REQUEST_ID": "not an id"}
    body = b"".join(WSGIRequestBodyLimit(lambda *_: [])(environ, start_response))
    assert answered["status"].startswith("413")
    assert json.loads(body) == {
        "code": "payload_too_large",
        "detail": "request body is over the limit of 100 bytes (TICKWORK_MAX_REQUEST_BYTES)",
    }
    assert answered["headers"]["X-Request-Id"] != "not an id"  # an invalid id is replaced, not echoed


def test_a_bulk_error_keeps_its_per_index_list(api):
    """Invalid items of a bulk request are still listed by index, with the code and a detail."""
    response = api.post("/v1/jobs/bulk", {"jobs": [JOB, {**JOB, "nmae": 1}]}, format="json")
    body = _assert_shaped(response, 400, "invalid")
    assert body == {
        "errors": [{"index": 1, "nmae": ["unknown field"]}],
        "code": "invalid",
        "detail": "1 of the 2 jobs are invalid and none was created; job 1: nmae: unknown field",
    }


def test_the_audit_row_of_a_refusal_still_names_its_fields(api):
    """The audit log's reason of an invalid request is its fields' messages, not the code."""
    from audit.models import AuditEntry

    api.post("/v1/jobs", {**JOB, "nmae": 1}, format="json")
    assert AuditEntry.objects.get(action="job.create").detail == "nmae: unknown field"
