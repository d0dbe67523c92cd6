"""Issue 33, HTTP conventions: X-Request-Id on every response, unknown list parameters refused,
RateLimit headers for a tenant with a submit rate, CORS for the origins allowed, Location on a
201, and a job's ETag with If-Match (412 when it is stale)."""

import uuid

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEntry
from jobs.models import Job

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


# --- Location ---------------------------------------------------------------------------------------


def test_every_201_says_where_its_object_is(api):
    """A 201 had no Location."""
    created = api.post("/v1/jobs", JOB, format="json")
    assert created.status_code == 201
    assert created["Location"] == f"http://testserver/v1/jobs/{created.json()['jobId']}"
    assert api.get(created["Location"]).json()["jobId"] == created.json()["jobId"]

    from web.api.examples import ALERT_RULE_CREATE

    made = api.post("/v1/alerts/rules", ALERT_RULE_CREATE[0].value, format="json")
    assert made.status_code == 201, made.content
    assert made["Location"] == f"http://testserver/v1/alerts/rules/{made.json()['ruleId']}"
    assert api.get(made["Location"]).status_code == 200

    # A batch is no one object: its Location is the list its jobs joined.
    batch = api.post("/v1/jobs/bulk", {"jobs": [JOB, JOB]}, format="json")
    assert batch.status_code == 201 and batch["Location"] == "http://testserver/v1/jobs"


def test_a_replayed_create_is_a_200_without_location(api):
    api.post("/v1/jobs", JOB, format="json", HTTP_IDEMPOTENCY_KEY="k")
    again = api.post("/v1/jobs", JOB, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert again.status_code == 200 and "Location" not in again


# --- RateLimit headers on creates -------------------------------------------------------------------


def test_each_create_says_what_is_left_of_the_submit_rate(api, tenant):
    tenant.submit_rate_per_minute = 5
    tenant.save()
    first = api.post("/v1/jobs", JOB, format="json")
    assert (first["RateLimit-Limit"], first["RateLimit-Remaining"], first["RateLimit-Policy"]) == ("5", "4", "5;w=60")
    assert 1 <= int(first["RateLimit-Reset"]) <= 60
    batch = api.post("/v1/jobs/bulk", {"jobs": [JOB, JOB, JOB]}, format="json")
    assert batch.status_code == 201 and batch["RateLimit-Remaining"] == "1"
    assert api.post("/v1/jobs", JOB, format="json")["RateLimit-Remaining"] == "0"
    refused = api.post("/v1/jobs", JOB, format="json")
    assert refused.status_code == 429 and refused["RateLimit-Remaining"] == "0"


# --- ETag and If-Match ------------------------------------------------------------------------------


def test_a_job_carries_its_version_as_its_etag(api, tenant, make_job):
    job = make_job(tenant)
    assert api.get(f"/v1/jobs/{job.pk}")["ETag"] == '"1"'
    changed = api.patch(f"/v1/jobs/{job.pk}", {"name": "renamed"}, format="json")
    assert changed["ETag"] == '"2"'
    assert api.put(f"/v1/jobs/{job.pk}", {"timeoutSec": 60}, format="json")["ETag"] == '"3"'
    assert api.get(f"/v1/jobs/{job.pk}")["ETag"] == '"3"'
    # A pause or resume changes the job's state, not its definition: the version stays.
    assert api.post(f"/v1/jobs/{job.pk}/pause")["ETag"] == '"3"'
    assert api.post(f"/v1/jobs/{job.pk}/resume")["ETag"] == '"3"'
    assert "ETag" not in api.post(f"/v1/jobs/{job.pk}/resume", QUERY_STRING="dryRun=true")  # a preview, not the job


def test_a_stale_if_match_from_a_second_writer_is_a_412(api, tenant, make_job):
    """Two operators read version 1; the first one's change wins, the second one's is refused
    (it overwrote the first in silence, although the job has versions)."""
    job = make_job(tenant, name="nightly")
    tag = api.get(f"/v1/jobs/{job.pk}")["ETag"]
    first = api.patch(f"/v1/jobs/{job.pk}", {"name": "first"}, format="json", HTTP_IF_MATCH=tag)
    assert first.status_code == 200

    second = api.patch(f"/v1/jobs/{job.pk}", {"name": "second"}, format="json", HTTP_IF_MATCH=tag)
    assert second.status_code == 412
    assert second.json() == {
        "code": "precondition_failed",
        "detail": f"job {job.pk} is at version 2; the change was asked of version 1: "
        'read the job again (its ETag is now "2") and make the change on it',
    }
    assert second["ETag"] == '"2"'
    assert api.get(f"/v1/jobs/{job.pk}").json()["name"] == "first"
    outcomes = AuditEntry.objects.filter(action="job.update").order_by("at").values_list("outcome", flat=True)
    assert list(outcomes) == ["OK", "REFUSED"]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param(
            lambda api, path, tag: api.put(path, {"name": "x"}, format="json", HTTP_IF_MATCH=tag), 200, id="PUT"
        ),
        pytest.param(lambda api, path, tag: api.delete(path, HTTP_IF_MATCH=tag), 200, id="DELETE"),
        pytest.param(lambda api, path, tag: api.post(f"{path}/pause", HTTP_IF_MATCH=tag), 200, id="pause"),
    ],
)
def test_put_delete_and_pause_honour_if_match(api, tenant, make_job, call, expected):
    job = make_job(tenant)
    path = f"/v1/jobs/{job.pk}"
    for stale in ('"7"', 'W/"1"', '"abc"', '"2", W/"1"'):
        assert call(api, path, stale).status_code == 412, stale
    for malformed in ("1", "", '"1" "2"', "* , *"):
        refused = call(api, path, malformed)
        assert refused.status_code == 400, malformed
        assert refused.json()["If-Match"] == ['must be * or entity tags, as an ETag gives them: "3"']
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE" and Job.objects.get(pk=job.pk).name == job.name
    assert call(api, path, '"9", "1"').status_code == expected  # any of the tags listed


def test_resume_honours_if_match_and_star_or_no_header_means_any_version(api, tenant, make_job):
    job = make_job(tenant)
    path = f"/v1/jobs/{job.pk}"
    api.post(f"{path}/pause")
    assert api.post(f"{path}/resume", HTTP_IF_MATCH='"2"').status_code == 412
    assert api.post(f"{path}/resume", HTTP_IF_MATCH="*").status_code == 200
    api.post(f"{path}/pause")
    assert api.post(f"{path}/resume").status_code == 200


def test_two_writers_with_the_same_etag_at_once_one_wins(transactional_db, tenant, make_job):
    """Under the job's row lock: eight PATCHes with If-Match "1" at once, through the API, each on
    its own connection: one is 200, the seven others 412, and the job has version 2."""
    import threading

    from django.db import connection

    from tenants.services import token_create

    if connection.vendor != "postgresql":
        pytest.skip("row locks and concurrent connections: PostgreSQL (DATABASE_URL)")
    job = make_job(tenant)
    _, raw = token_create(tenant=tenant)
    barrier = threading.Barrier(8)
    statuses: list[int] = []

    def writer(index: int) -> None:
        client = APIClient(HTTP_AUTHORIZATION=f"Bearer {raw}")
        try:
            barrier.wait(timeout=30)
            response = client.patch(f"/v1/jobs/{job.pk}", {"name": f"w{index}"}, format="json", HTTP_IF_MATCH='"1"')
            statuses.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(statuses) == [200] + [412] * 7


def test_a_resume_dry_run_refuses_a_malformed_if_match_as_resume_does(api, tenant, make_job):
    """An empty or malformed If-Match is a 400 naming it, for the preview too (it changes nothing,
    but the header's form is the schema's)."""
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    api.post(f"/v1/jobs/{job.pk}/pause")
    answer = api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true", HTTP_IF_MATCH="")
    assert answer.status_code == 400 and "If-Match" in answer.json()
    assert api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true", HTTP_IF_MATCH="*").status_code == 200
