"""POST /v1/jobs/bulk: up to 1,000 jobs, all or nothing (DESIGN.md, "Contract additions (wave 2)")."""

import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from executions.models import Execution
from jobs import cron
from jobs.models import Job
from testing import harness
from web.json_input import MAX_DEPTH
from web.tests.test_api_jobs import BAD_BODIES, JOB_FIELDS, RUN_AT, cron_body, delayed_body, once_body, parse

pytestmark = pytest.mark.django_db

URL = "/v1/jobs/bulk"


def counts() -> tuple[int, int, int]:
    return Job.objects.count(), Execution.objects.count(), harness.events_count()


def bulk(client, items, **headers):
    return client.post(URL, {"jobs": items}, format="json", **headers)


def numbered(count: int) -> list[dict]:
    return [once_body(name=f"job {index}", payload={"index": index}) for index in range(count)]


# --- created: all of them, in order, each with its first execution -------------------------------


def test_a_batch_answers_201_with_its_jobs_in_order_each_as_post_v1_jobs_answers(api, tenant):
    """Each job of the answer has the single create's shape, in the order of the request's items;
    each is the tenant's, with one PENDING execution due at its first fire and one event."""
    items = [once_body(name="a"), delayed_body(name="b"), cron_body(name="c"), once_body(name="d")]

    response = bulk(api, items)

    assert response.status_code == 201, response.content
    jobs = response.json()["jobs"]
    assert [job["name"] for job in jobs] == ["a", "b", "c", "d"]
    for job in jobs:
        assert JOB_FIELDS <= job.keys()
        assert job["state"] == "ACTIVE"
        assert job["tenant"] == "acme"
    single = api.post("/v1/jobs", once_body(name="a"), format="json").json()
    assert jobs[0].keys() == single.keys()
    assert counts() == (5, 5, 5)
    for job in jobs:
        (execution,) = Execution.objects.filter(job_id=job["jobId"])
        assert (execution.state, execution.attempt, execution.origin) == ("PENDING", 1, "SCHEDULE")
        assert execution.tenant_id == tenant.pk
        assert execution.scheduled_for == execution.available_at == parse(job["nextFireAt"])
        (event,) = harness.events(execution.pk)
        assert (event.from_state, event.to_state, event.attempt) == ("", "PENDING", 1)


def test_each_answered_job_is_what_reading_it_back_answers(api):
    """The batch's answer is built without DRF's per-object lookups and its rows are written in one
    statement per table: reading each job back gives the same fields and values, defaults and
    every optional field included."""
    items = [
        once_body(),
        delayed_body(priority="LOW", payload={"deep": {"list": [1, 2.5, None, "é"]}}),
        cron_body(
            schedule="30 2 * * 1-5",
            timezone="Asia/Kolkata",
            retryPolicy={"maxAttempts": 7, "backoff": "FIXED", "initialDelayMs": 10, "maxDelayMs": 10, "jitter": False},
            timeoutSec=42,
            priority="HIGH",
            misfirePolicy="RUN_ALL",
            concurrencyPolicy="REPLACE",
        ),
    ]

    answered = bulk(api, items).json()["jobs"]

    detail_only = {"latestExecutions": None, "lastRunState": None}  # the detail's own fields
    for job in answered:
        assert api.get(f"/v1/jobs/{job['jobId']}").json() | detail_only == job | detail_only
    stored = Job.objects.get(pk=answered[0]["jobId"])
    assert (stored.priority, stored.backoff, stored.state) == (1, "EXPONENTIAL", "ACTIVE")
    assert Execution.objects.get(job=stored).priority == 1


def test_first_fires_are_as_a_single_create_makes_them(api):
    """ONCE at runAt, DELAYED at creation + delaySec, CRON at its schedule's next fire in its zone."""
    before = timezone.now()
    items = [
        once_body(),
        delayed_body(delaySec=600),
        cron_body(schedule="30 2 * * *", timezone="America/Los_Angeles"),
    ]

    once, delayed, cron_job = bulk(api, items).json()["jobs"]
    after = timezone.now()

    assert once["nextFireAt"] == RUN_AT
    due = parse(delayed["nextFireAt"])
    assert before + timedelta(seconds=599) <= due <= after + timedelta(seconds=601)
    assert parse(delayed["runAt"]) == due
    expected = cron.next_fire("30 2 * * *", "America/Los_Angeles", parse(cron_job["createdAt"]))
    assert abs(parse(cron_job["nextFireAt"]) - expected) < timedelta(minutes=1)
    assert parse(cron_job["nextFireAt"]).astimezone(cron.parse_timezone("America/Los_Angeles")).hour == 2


def test_a_batch_of_1000_ordinary_jobs_fits_the_body_limit_and_is_created(api):
    """1,000 jobs with small payloads are one request: well under the body limit, all created,
    and answered again, in order, to a replay under the same key."""
    items = numbered(1000)
    assert len(json.dumps({"jobs": items})) < settings.TICKWORK_MAX_REQUEST_BYTES

    response = bulk(api, items, HTTP_IDEMPOTENCY_KEY="big")
    again = bulk(api, items, HTTP_IDEMPOTENCY_KEY="big")

    assert response.status_code == 201, response.content[:500]
    assert [job["payload"]["index"] for job in response.json()["jobs"]] == list(range(1000))
    assert again.status_code == 200
    assert again.json() == response.json()
    assert counts() == (1000, 1000, 1000)


def test_the_tenant_a_token_names_for_itself_is_accepted(api):
    """A token may name its own tenant in an item, as a single create may."""
    assert bulk(api, [once_body(tenant="acme")]).status_code == 201


# --- refused: every bad item named, nothing created ----------------------------------------------------


def test_bad_items_among_many_are_each_named_by_index_and_nothing_is_created(api):
    """One 400 lists every bad item with its index and field; the good ones are not created either."""
    items = numbered(50)
    items[7] = once_body(target={"handler": "no-such-handler"})
    items[30] = cron_body(schedule="61 * * * *")
    items[41] = "not a job"
    items[44] = {k: v for k, v in once_body().items() if k != "runAt"}

    response = bulk(api, items)

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [error["index"] for error in errors] == [7, 30, 41, 44]
    assert "handler" in errors[0]["target"]
    assert errors[1]["schedule"]
    assert errors[2]["non_field_errors"]
    assert errors[3]["runAt"]
    assert counts() == (0, 0, 0)


@pytest.mark.parametrize(("body", "path"), [case[1:] for case in BAD_BODIES], ids=[case[0] for case in BAD_BODIES])
def test_each_kind_of_bad_item_is_reported_as_a_single_create_reports_it(api, body, path):
    """An item is checked exactly as POST /v1/jobs checks a body: the same field is named."""
    response = bulk(api, [once_body(), once_body(), body])

    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    assert error["index"] == 2
    for key in path:
        assert key in error, (path, error)
        error = error[key]
    assert error and all(isinstance(message, str) and message for message in error)
    assert counts() == (0, 0, 0)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"jobs": [once_body()] * 1001}, "at most 1000"),
        ({"jobs": []}, "at least one"),
        ({}, "required"),
        ({"jobs": None}, "required"),
        ({"jobs": once_body()}, "list"),
        ({"jobs": "everything"}, "list"),
    ],
    ids=["1001 items", "empty", "missing", "null", "an object", "a string"],
)
def test_a_batch_that_is_not_1_to_1000_jobs_is_400_naming_jobs(api, body, message):
    """More than 1,000, none, or not a list: 400 naming `jobs`, nothing created."""
    response = api.post(URL, body, format="json")

    assert response.status_code == 400
    assert message in response.json()["jobs"][0]
    assert counts() == (0, 0, 0)


def test_an_unknown_top_level_field_is_named(api):
    """The batch body holds `jobs` only; anything else is named as unknown."""
    response = api.post(URL, {"jobs": [once_body()], "tenant": "acme"}, format="json")

    assert response.status_code == 400
    assert response.json()["tenant"] == ["unknown field"]
    assert counts() == (0, 0, 0)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"name": "a\\u0000b"}', "name"),
        ('{"payload": {"note": "\\ud800"}}', "payload"),
        ('{"payload": {"\\u0000": 1}}', "payload"),
        ('{"payload": {"big": 1e999}}', "payload"),
    ],
    ids=["NUL in name", "lone surrogate in payload", "NUL in a payload key", "number too large"],
)
def test_unstorable_text_in_an_item_is_400_naming_its_index_and_field(api, raw, field):
    """NUL bytes, lone surrogates and infinite numbers are refused per item, before anything is written."""
    item = json.dumps(once_body())[:-1] + ", " + raw[1:]  # the later of two same keys wins
    body = '{"jobs": [' + json.dumps(once_body()) + ", " + item + "]}"

    response = api.post(URL, body, content_type="application/json")

    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    assert error["index"] == 1
    assert error[field]
    assert counts() == (0, 0, 0)


def test_an_unstorable_top_level_field_name_is_400(api):
    response = api.post(URL, '{"jobs": [], "\\ud800": 1}', content_type="application/json")

    assert response.status_code == 400
    assert counts() == (0, 0, 0)


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_an_item_nests_as_deep_as_a_single_body_may_and_no_deeper(api):
    """A payload nested MAX_DEPTH levels is accepted in a batch as in a single create; one level
    more is a 400, in both."""
    assert api.post("/v1/jobs", once_body(payload=nested(MAX_DEPTH)), format="json").status_code == 201
    assert bulk(api, [once_body(payload=nested(MAX_DEPTH))]).status_code == 201

    single = api.post("/v1/jobs", once_body(payload=nested(MAX_DEPTH + 1)), format="json")
    deep = bulk(api, [once_body(payload=nested(MAX_DEPTH + 1))])

    assert single.status_code == deep.status_code == 400
    assert "nested deeper" in deep.json()["jobs"][0]
    assert counts() == (2, 2, 2)


def test_a_deeply_nested_body_is_400_without_a_recursion_error(api):
    body = '{"jobs": [' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "]}"

    response = api.post(URL, body, content_type="application/json")

    assert response.status_code == 400
    assert "jobs" in response.json()


def test_a_body_over_the_request_limit_is_400_naming_jobs_and_creates_nothing(api):
    """A batch bigger than TICKWORK_MAX_REQUEST_BYTES is refused before it is parsed."""
    blob = "x" * (settings.TICKWORK_MAX_PAYLOAD_BYTES - 100)
    body = json.dumps({"jobs": [once_body(payload={"blob": blob})] * 40})
    assert len(body) > settings.TICKWORK_MAX_REQUEST_BYTES

    response = api.post(URL, body, content_type="application/json")

    assert response.status_code == 400
    assert "TICKWORK_MAX_REQUEST_BYTES" in response.json()["jobs"][0]
    assert counts() == (0, 0, 0)


def test_malformed_json_is_400(api):
    response = api.post(URL, '{"jobs": [', content_type="application/json")

    assert response.status_code == 400
    assert "JSON" in response.json()["detail"]


# --- tenants -----------------------------------------------------------------------------------------------


def test_a_token_cannot_create_in_another_tenant(api, other_tenant):
    """An item naming another tenant's slug is refused by index; nothing is created anywhere."""
    response = bulk(api, [once_body(), once_body(tenant="globex")])

    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["index"] == 1
    assert "own tenant" in error["tenant"][0]
    assert counts() == (0, 0, 0)


def test_another_tenant_sees_none_of_the_batch(api, other_api):
    jobs = bulk(api, numbered(3)).json()["jobs"]

    for job in jobs:
        assert other_api.get(f"/v1/jobs/{job['jobId']}").status_code == 404
    assert other_api.get("/v1/jobs").json()["results"] == []


@pytest.fixture
def staff_api(db) -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("ops", is_staff=True))
    return client


def test_a_staff_session_creates_in_the_tenant_its_items_name(staff_api, tenant, other_tenant):
    """A session that sees several tenants names one, as for a single create; a batch is in one tenant."""
    response = bulk(staff_api, [once_body(tenant="globex"), once_body(tenant="globex")])

    assert response.status_code == 201, response.content
    assert {job["tenant"] for job in response.json()["jobs"]} == {"globex"}
    assert Execution.objects.filter(tenant=other_tenant).count() == 2


def test_a_staff_session_must_name_one_tenant_for_the_whole_batch(staff_api, tenant, other_tenant):
    response = bulk(
        staff_api, [once_body(tenant="acme"), once_body(), once_body(tenant="globex"), once_body(tenant="nope")]
    )

    assert response.status_code == 400
    errors = {error["index"]: error for error in response.json()["errors"]}
    assert sorted(errors) == [1, 2, 3]
    assert "required" in errors[1]["tenant"][0]
    assert "one tenant" in errors[2]["tenant"][0]
    assert "unknown tenant" in errors[3]["tenant"][0]
    assert counts() == (0, 0, 0)


# --- quotas -------------------------------------------------------------------------------------------------


def test_a_batch_that_would_pass_max_active_jobs_is_refused_whole(api, tenant):
    """With room for 4 more active jobs, a batch of 5 answers 429 and creates none; 4 fit."""
    tenant.max_active_jobs = 5
    tenant.save()
    api.post("/v1/jobs", once_body(), format="json")

    refused = bulk(api, numbered(5))

    assert refused.status_code == 429
    assert "limit of 5" in refused.json()["detail"]
    assert refused["Retry-After"]
    assert counts() == (1, 1, 1)
    assert bulk(api, numbered(4)).status_code == 201
    assert counts() == (5, 5, 5)


def test_submit_rate_counts_each_job_of_a_batch(api, tenant):
    """A rate of 10 a minute: a batch of 6 fits, a second of 6 does not (and is not counted), 4 more fit."""
    cache.clear()  # an earlier test's tenant may have had this one's id (SQLite reuses it) in this minute
    tenant.submit_rate_per_minute = 10
    tenant.save()
    minute = timezone.now().replace(second=0, microsecond=0)

    statuses = [bulk(api, numbered(n)).status_code for n in (6, 6, 4)]
    single = api.post("/v1/jobs", once_body(), format="json").status_code

    if timezone.now().replace(second=0, microsecond=0) != minute:
        pytest.skip("the rate window turned over during the test")
    assert statuses == [201, 429, 201]
    assert single == 429
    assert counts() == (10, 10, 10)


# --- Idempotency-Key ----------------------------------------------------------------------------------------


def test_the_same_key_and_batch_again_answers_200_with_the_same_jobs(api):
    items = numbered(5)
    first = bulk(api, items, HTTP_IDEMPOTENCY_KEY="import-7")

    again = bulk(api, items, HTTP_IDEMPOTENCY_KEY="import-7")

    assert (first.status_code, again.status_code) == (201, 200)
    assert [job["jobId"] for job in again.json()["jobs"]] == [job["jobId"] for job in first.json()["jobs"]]
    assert again.json() == first.json()
    assert counts() == (5, 5, 5)


@pytest.mark.parametrize(
    "change",
    [
        lambda items: items[:-1],
        lambda items: [*items, once_body()],
        lambda items: [once_body(name="other"), *items[1:]],
        lambda items: items[::-1],
    ],
    ids=["fewer", "more", "another item", "another order"],
)
def test_the_same_key_with_another_batch_is_409_and_creates_nothing(api, change):
    items = numbered(5)
    bulk(api, items, HTTP_IDEMPOTENCY_KEY="import-7")

    response = bulk(api, change(items), HTTP_IDEMPOTENCY_KEY="import-7")

    assert response.status_code == 409
    assert response.json()["field"] == "Idempotency-Key"
    assert counts() == (5, 5, 5)


def test_a_batch_key_and_a_single_key_do_not_answer_each_others_jobs(api):
    """A batch under `k` holds `k#0`…; a single create naming `k#0` conflicts rather than being given
    a batch's job, and a single key `k` leaves a batch under `k` free."""
    bulk(api, numbered(2), HTTP_IDEMPOTENCY_KEY="k")

    clash = api.post("/v1/jobs", once_body(), format="json", HTTP_IDEMPOTENCY_KEY="k#0")
    apart = api.post("/v1/jobs", once_body(), format="json", HTTP_IDEMPOTENCY_KEY="k")

    assert clash.status_code == 409
    assert apart.status_code == 201
    assert counts() == (3, 3, 3)


def test_keys_are_per_tenant(api, other_api):
    assert bulk(api, numbered(2), HTTP_IDEMPOTENCY_KEY="k").status_code == 201
    assert bulk(other_api, numbered(2), HTTP_IDEMPOTENCY_KEY="k").status_code == 201
    assert counts() == (4, 4, 4)


def test_an_overlong_key_is_400_and_one_that_fits_with_its_item_suffixes_is_accepted(api):
    """The batch's jobs store `<key>#<index>` in a 255-character column: a bulk key is at most 251."""
    assert bulk(api, [once_body()], HTTP_IDEMPOTENCY_KEY="k" * 252).status_code == 400
    assert counts() == (0, 0, 0)

    response = bulk(api, numbered(2), HTTP_IDEMPOTENCY_KEY="k" * 251)

    assert response.status_code == 201
    assert Job.objects.filter(idempotency_key="k" * 251 + "#1").exists()


def test_a_replay_under_the_active_job_limit_is_200_not_429(api, tenant):
    """A replay is an answer, not a new submission: a tenant at its limit still gets its batch back."""
    tenant.max_active_jobs = 3
    tenant.save()
    first = bulk(api, numbered(3), HTTP_IDEMPOTENCY_KEY="k")

    again = bulk(api, numbered(3), HTTP_IDEMPOTENCY_KEY="k")

    assert (first.status_code, again.status_code) == (201, 200)


# --- the schema -----------------------------------------------------------------------------------------------


def test_the_schema_describes_the_bulk_operation(client):
    schema = client.get("/v1/schema?format=json").json()
    operation = schema["paths"]["/v1/jobs/bulk"]["post"]

    body = operation["requestBody"]["content"]["application/json"]["schema"]
    component = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    jobs = component["properties"]["jobs"]
    assert (jobs["minItems"], jobs["maxItems"]) == (1, 1000)
    assert jobs["items"]["$ref"].endswith("/JobInputRequest")
    assert component["additionalProperties"] is False
    assert {"200", "201", "400", "401", "409", "413", "429"} <= operation["responses"].keys()
    errors = operation["responses"]["400"]["content"]["application/json"]["schema"]
    assert errors == {"$ref": "#/components/schemas/Error"}  # the one error shape, with its `errors` by index
    assert schema["components"]["schemas"]["Error"]["properties"]["errors"]["items"]["required"] == ["index"]
    (key,) = [p for p in operation["parameters"] if p["name"] == "Idempotency-Key"]
    assert key["schema"]["maxLength"] == 251


def test_each_job_of_a_batch_has_its_version_1_made_by_the_caller(api):
    """A batch gives every job its version 1, as a single create does, naming the token: held by
    the job's row, with nothing copied into the versions table until the job first changes."""
    from jobs.models import JobVersion

    response = bulk(api, numbered(3))

    assert response.status_code == 201, response.content
    ids = [job["jobId"] for job in response.json()["jobs"]]
    for job_id in ids:
        [version] = api.get(f"/v1/jobs/{job_id}/versions").json()["results"]
        assert (version["version"], version["changes"]) == (1, [])
        assert version["actor"].startswith("token ")
    assert not JobVersion.objects.filter(job_id__in=ids).exists()


def test_an_item_whose_schedule_never_fires_for_its_own_id_is_a_400_by_index_and_nothing_is_made(api, monkeypatch):
    """Validation cannot resolve an H schedule before the job has its id; when the job's own
    resolution never fires (jobs.cron raises), the batch answers 400 for that item's schedule and
    creates nothing."""
    from jobs.cron import CronError
    from scheduling import job_creation

    real, calls = job_creation.first_fire, []

    def first_fire(*, job, now):
        calls.append(job)
        if len(calls) == 2:
            raise CronError("the schedule never fires for this job's id")
        return real(job=job, now=now)

    monkeypatch.setattr(job_creation, "first_fire", first_fire)
    before = counts()

    response = bulk(api, numbered(3))

    assert response.status_code == 400
    assert response.json() == {
        "errors": [{"index": 1, "schedule": ["the schedule never fires for this job's id"]}],
        "code": "invalid",
        "detail": "1 of the 3 jobs are invalid and none was created; job 1: schedule: "
        "the schedule never fires for this job's id",
    }
    assert counts() == before
