"""Issue 33, HTTP conventions: X-Request-Id on every response, unknown list parameters refused,
RateLimit headers for a tenant with a submit rate, CORS for the origins allowed, Location on a
201, and a job's ETag with If-Match (412 when it is stale)."""

import uuid

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEntry

pytestmark = pytest.mark.django_db

JOB = {"name": "nightly", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}
GIVEN_ID = "5f0c5f43-8d2b-4f7e-9a51-0b6d1d4a2c10"


# --- X-Request-Id -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda api: api.get("/v1/jobs"), id="GET list"),
        pytest.param(lambda api: api.get("/v1/health"), id="GET health"),
        pytest.param(lambda api: api.post("/v1/jobs", JOB, format="json"), id="POST"),
        pytest.param(lambda api: api.get("/v1/nope"), id="404 unknown path"),
        pytest.param(lambda api: api.get("/v1/jobs/nope"), id="404 no such job"),
        pytest.param(lambda api: APIClient().get("/v1/jobs"), id="401"),
        pytest.param(lambda api: api.get("/v1/schema"), id="schema"),
    ],
)
def test_every_response_carries_a_request_id(api, call):
    """X-Request-Id came back on POST only (the audited ones); now on every answer, a new UUID each."""
    first, second = call(api), call(api)
    assert uuid.UUID(first["X-Request-Id"]) != uuid.UUID(second["X-Request-Id"])


def test_a_valid_incoming_request_id_is_kept_and_files_the_audit_row(api):
    """A caller's (or its proxy's) UUID comes back as it was sent, and the audit row is under it."""
    response = api.post("/v1/jobs", JOB, format="json", HTTP_X_REQUEST_ID=GIVEN_ID)
    assert response["X-Request-Id"] == GIVEN_ID
    assert str(AuditEntry.objects.get(action="job.create").request_id) == GIVEN_ID
    hyphenless = GIVEN_ID.replace("-", "").upper()
    assert api.get("/v1/nope", HTTP_X_REQUEST_ID=hyphenless)["X-Request-Id"] == hyphenless


@pytest.mark.parametrize("given", ["", "abc", "x" * 300, GIVEN_ID + "\r\nSet-Cookie: a=b", "{" + GIVEN_ID + "}"])
def test_an_invalid_incoming_request_id_is_replaced(api, given):
    """Anything but a UUID is not echoed (no header injection, nothing an audit row cannot file)."""
    answered = api.get("/v1/jobs", HTTP_X_REQUEST_ID=given)["X-Request-Id"]
    assert answered != given and uuid.UUID(answered)


# --- Unknown list parameters ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "query", "said"),
    [
        ("/v1/jobs", {"page_size": "1"}, "unknown parameter; did you mean pageSize? this list takes cursor, failing"),
        ("/v1/jobs", {"ordering": "name"}, "unknown parameter; this list takes cursor, failing, handler, name"),
        ("/v1/jobs", {"stat": "ACTIVE"}, "unknown parameter; did you mean state?"),
        ("/v1/executions", {"jobid": "x"}, "unknown parameter; did you mean jobId?"),
        ("/v1/events", {"format": "json"}, "unknown parameter; this list takes cursor"),
        ("/v1/alerts", {"limit": "5"}, "unknown parameter; this list takes cursor"),
        (
            "/v1/alerts/rules",
            {"page": "2"},
            "unknown parameter; did you mean pageSize? this list takes cursor, pageSize",
        ),
        ("/v1/pools", {"pool": "default"}, "unknown parameter; this list takes no parameter"),
        ("/v1/dead-letter/groups", {"cursor": "x"}, "unknown parameter; this list takes no parameter"),
    ],
)
def test_an_unknown_list_parameter_is_a_400_naming_it(api, path, query, said):
    """`?page_size=1` and `?ordering=name` were ignored without a word (and echoed into `next`)."""
    response = api.get(path, query)
    assert response.status_code == 400, response.content
    body = response.json()
    ((name, _),) = query.items()
    assert body["code"] == "invalid" and list(body) == [name, "code", "detail"]
    assert body[name][0].startswith(said), body[name]


def test_a_job_s_lists_refuse_unknown_parameters_too(api, tenant, make_job):
    job = make_job(tenant)
    for tail in ("executions", "runs", "versions"):
        response = api.get(f"/v1/jobs/{job.pk}/{tail}", {"limit": "1"})
        assert response.status_code == 400, tail
        assert response.json()["limit"] == ["unknown parameter; this list takes cursor, pageSize"]


def test_known_parameters_still_page_and_filter(api, tenant, make_job):
    for index in range(3):
        make_job(tenant, name=f"job {index}")
    page = api.get("/v1/jobs", {"pageSize": 2, "state": "ACTIVE", "name": "job"}).json()
    assert len(page["results"]) == 2
    assert len(api.get(page["next"]).json()["results"]) == 1


# --- RateLimit headers ------------------------------------------------------------------------------

RATE_HEADERS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy")


@pytest.fixture(autouse=True)
def fresh_rate_windows():
    """The windows are counted in the cache under the tenant's id, which SQLite gives again in each
    test: each test counts from zero."""
    from django.core.cache import cache

    cache.clear()


def test_the_429_of_the_submit_rate_says_where_the_tenant_stands(api, tenant):
    """A tenant with a submit rate saw only Retry-After on its 429; it gets the RateLimit headers."""
    tenant.submit_rate_per_minute = 2
    tenant.save()
    for _ in range(2):
        api.post("/v1/jobs", JOB, format="json")
    refused = api.post("/v1/jobs", JOB, format="json")
    assert refused.status_code == 429
    assert (refused["RateLimit-Limit"], refused["RateLimit-Remaining"]) == ("2", "0")
    assert refused["RateLimit-Policy"] == "2;w=60"
    assert 1 <= int(refused["RateLimit-Reset"]) <= 60
    assert refused["RateLimit-Reset"] == refused["Retry-After"]


def test_a_refused_batch_gives_its_count_back_in_the_headers(api, tenant):
    tenant.submit_rate_per_minute = 3
    tenant.save()
    refused = api.post("/v1/jobs/bulk", {"jobs": [JOB] * 4}, format="json")
    assert refused.status_code == 429
    assert (refused["RateLimit-Limit"], refused["RateLimit-Remaining"]) == ("3", "3")


def test_without_a_submit_rate_there_are_no_ratelimit_headers(api):
    response = api.post("/v1/jobs", JOB, format="json")
    assert response.status_code == 201
    assert not set(RATE_HEADERS) & set(response.headers)


# --- CORS -------------------------------------------------------------------------------------------

ALLOWED = "https://ops.example.com"


@pytest.fixture
def cors(settings):
    settings.CORS_ALLOWED_ORIGINS = [ALLOWED]


def test_an_allowed_origin_may_read_the_api_and_its_headers(api, cors):
    response = api.get("/v1/jobs", HTTP_ORIGIN=ALLOWED)
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    exposed = {name.strip().lower() for name in response["Access-Control-Expose-Headers"].split(",")}
    assert {"etag", "location", "x-request-id", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"} <= exposed
    assert "Access-Control-Allow-Credentials" not in response  # tokens, not cookies


def test_an_allowed_origin_s_preflight_is_answered(cors):
    """A browser asks before a PATCH with If-Match and a token: the answer allows them, without a token."""
    response = APIClient().options(
        "/v1/jobs/abc",
        HTTP_ORIGIN=ALLOWED,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="PATCH",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type, if-match, idempotency-key",
    )
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    assert "PATCH" in response["Access-Control-Allow-Methods"]
    allowed = {name.strip() for name in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "if-match", "idempotency-key"} <= allowed
    assert response["X-Request-Id"]


def test_another_origin_is_refused_and_so_is_every_origin_by_default(api, cors, settings):
    for origin in ("https://evil.example.com", "http://ops.example.com"):
        response = api.get("/v1/jobs", HTTP_ORIGIN=origin)
        assert "Access-Control-Allow-Origin" not in response
        preflight = APIClient().options("/v1/jobs", HTTP_ORIGIN=origin, HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST")
        assert "Access-Control-Allow-Origin" not in preflight
    settings.CORS_ALLOWED_ORIGINS = []
    assert "Access-Control-Allow-Origin" not in api.get("/v1/jobs", HTTP_ORIGIN=ALLOWED)


def test_cors_is_for_the_api_only(client, cors):
    """The dashboard and the admin are same-origin pages: no CORS headers there."""
    for path in ("/dashboard/", "/admin/login/"):
        assert "Access-Control-Allow-Origin" not in client.get(path, HTTP_ORIGIN=ALLOWED)


def test_the_allow_list_is_read_from_the_environment():
    """TICKWORK_CORS_ORIGINS, comma-separated; none by default (the settings loaded afresh)."""
    import json
    import os
    import subprocess
    import sys

    def origins(**env) -> list[str]:
        environ = {k: v for k, v in os.environ.items() if k != "TICKWORK_CORS_ORIGINS"} | env
        code = "import json, scheduler_project.settings as s; print(json.dumps(s.CORS_ALLOWED_ORIGINS))"
        out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    assert origins(TICKWORK_CORS_ORIGINS=f"{ALLOWED}, https://app.example.com") == [ALLOWED, "https://app.example.com"]
    assert origins() == []
