"""Issue #10's API defects and papercuts: input the server used to answer with a 500, accept
silently, or refuse unclearly. Each test names the item it covers."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from executions.states import ExecutionState
from jobs.models import Job
from scheduling.execution_changes import execution_redrive
from scheduling.failures import execution_settle_failure

MAX_DEPTH = 32  # the documented nesting limit (README, "The API")

pytestmark = pytest.mark.django_db

RUN_AT = "2031-03-14T09:00:00Z"


def once_body(**changes) -> dict:
    body = {"name": "nightly report", "type": "ONCE", "runAt": RUN_AT, "target": {"handler": "noop"}, "payload": {}}
    body.update(changes)
    return body


def post_raw(api, path: str, text: str, method: str = "post"):
    return getattr(api, method)(path, data=text.encode(), content_type="application/json")


def nested(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


# --- Defect 3: 500 instead of 400 ---------------------------------------------------------------

UNSTORABLE_BODIES = [
    pytest.param('"payload": {"note": "a\\u0000b"}', "payload", id="nul-in-payload-value"),
    pytest.param('"payload": {"a\\u0000": 1}', "payload", id="nul-in-payload-key"),
    pytest.param('"payload": {"note": "\\ud800"}', "payload", id="lone-surrogate-in-payload"),
    pytest.param('"payload": {"deep": [{"x": ["\\udfff"]}]}', "payload", id="lone-surrogate-nested"),
    pytest.param('"payload": {"big": 1e400}', "payload", id="number-too-large-for-a-float"),
    pytest.param('"name": "\\ud800"', "name", id="lone-surrogate-in-name"),
    pytest.param('"name": "a\\u0000"', "name", id="nul-in-name"),
    pytest.param('"schedule": "\\ud83d"', "schedule", id="lone-surrogate-in-schedule"),
    pytest.param('"target": {"handler": "noop\\u0000"}', "target", id="nul-in-handler"),
]


@pytest.mark.parametrize(("member", "field"), UNSTORABLE_BODIES)
def test_defect3_unstorable_text_on_create_is_400_naming_the_field(api, member, field):
    """NUL, lone surrogates and infinite numbers, anywhere in the body, are a 400 naming the
    field, with a JSON body the client can read; nothing is created."""
    body = json.dumps(once_body(name="ok"))[:-1] + ", " + member + "}"
    if member.startswith('"name"'):
        body = body.replace('"name": "ok", ', "")
    response = post_raw(api, "/v1/jobs", body)
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not Job.objects.exists()


def test_defect3_an_unstorable_key_at_the_top_is_400_naming_it_escaped(api):
    response = post_raw(api, "/v1/jobs", json.dumps(once_body())[:-1] + ', "na\\u0000me": 1}')
    assert response.status_code == 400
    assert list(response.json()) == ["na\\u0000me", "code", "detail"]
    assert response.json()["code"] == "invalid"
    assert not Job.objects.exists()


@pytest.mark.parametrize("method", ["patch", "put"])
@pytest.mark.parametrize(("member", "field"), UNSTORABLE_BODIES[:5])
def test_defect3_unstorable_text_on_update_is_400_and_changes_nothing(api, tenant, make_job, method, member, field):
    job = make_job(tenant, name="before", payload={"kept": True})
    response = post_raw(api, f"/v1/jobs/{job.pk}", "{" + member + "}", method=method)
    assert response.status_code == 400, response.content
    assert field in response.json()
    job.refresh_from_db()
    assert (job.name, job.payload) == ("before", {"kept": True})


def test_defect3_a_deeply_nested_payload_is_400_naming_payload(api):
    """5,000 levels used to raise RecursionError in the JSON parser (a 500)."""
    body = json.dumps(once_body())[:-1].replace('"payload": {}', '"payload": ' + nested(5000))
    response = post_raw(api, "/v1/jobs", body + "}")
    assert response.status_code == 400
    assert response.json() == {
        "payload": [f"is nested deeper than {MAX_DEPTH} levels"],
        "code": "invalid",
        "detail": f"payload: is nested deeper than {MAX_DEPTH} levels",
    }
    assert not Job.objects.exists()


def test_defect3_nesting_up_to_the_limit_is_accepted_and_one_more_is_refused(api):
    response = api.post("/v1/jobs", once_body(payload=json.loads(nested(MAX_DEPTH))), format="json")
    assert response.status_code == 201, response.content
    response = api.post("/v1/jobs", once_body(payload=json.loads(nested(MAX_DEPTH + 1))), format="json")
    assert response.status_code == 400
    assert "payload" in response.json()


def test_defect3_a_deeply_nested_update_is_400(api, tenant, make_job):
    job = make_job(tenant, payload={"kept": True})
    response = post_raw(api, f"/v1/jobs/{job.pk}", '{"payload": ' + nested(5000) + "}", method="patch")
    assert response.status_code == 400
    assert "payload" in response.json()
    job.refresh_from_db()
    assert job.payload == {"kept": True}


def test_defect3_brackets_inside_strings_do_not_count_as_nesting(api):
    response = api.post("/v1/jobs", once_body(payload={"text": "[{" * 1000}), format="json")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("param", ["scheduledAfter", "scheduledBefore"])
@pytest.mark.parametrize("offset", ["+16:00", "-16:00", "+23:59"])
def test_defect3_an_offset_postgresql_refuses_is_normalised_to_utc(api, tenant, make_job, param, offset):
    """+16:00 parses in Python but not in PostgreSQL: the filter compares in UTC instead."""
    make_job(tenant, run_at=timezone.now() + timedelta(days=1))
    response = api.get("/v1/executions", {param: f"2027-01-01T00:00:00{offset}"})
    assert response.status_code == 200, response.content


def test_defect3_scheduled_after_with_a_large_offset_filters_by_the_instant_it_names(api, tenant, make_job):
    job = make_job(tenant, run_at=timezone.now() + timedelta(hours=10))
    execution = job.executions.get()
    # 16 hours ahead of UTC: the instant is 16 h earlier than the wall time written.
    wall = (execution.scheduled_for + timedelta(hours=16) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
    ids = [
        row["executionId"] for row in api.get("/v1/executions", {"scheduledAfter": wall + "+16:00"}).json()["results"]
    ]
    assert ids == [str(execution.pk)]
    wall = (execution.scheduled_for + timedelta(hours=16) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert api.get("/v1/executions", {"scheduledAfter": wall + "+16:00"}).json()["results"] == []


def test_defect3_a_time_that_is_no_date_is_400_naming_the_parameter(api):
    for value in ("2027-13-01T00:00:00Z", "2027-01-01T00:00:00", ""):
        response = api.get("/v1/executions", {"scheduledAfter": value})
        assert response.status_code == 400, value
        assert "scheduledAfter" in response.json()


def test_defect3_a_bound_past_the_ends_of_the_calendar_in_utc_means_before_or_after_everything(api, tenant, make_job):
    """0001-01-01T00:00:00+01:00 is an hour before year 1 in UTC: it cannot be stored, but as a
    bound its meaning is plain."""
    make_job(tenant)
    early, late = "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"
    count = {
        (param, value): len(api.get("/v1/executions", {param: value}).json()["results"])
        for param in ("scheduledAfter", "scheduledBefore")
        for value in (early, late)
    }
    assert count == {
        ("scheduledAfter", early): 1,
        ("scheduledAfter", late): 0,
        ("scheduledBefore", early): 0,
        ("scheduledBefore", late): 1,
    }


def test_defect3_run_at_with_a_large_offset_is_stored_in_utc(api):
    response = api.post("/v1/jobs", once_body(runAt="2031-03-14T09:00:00+16:00"), format="json")
    assert response.status_code == 201, response.content
    assert response.json()["runAt"] == "2031-03-13T17:00:00Z"


def test_defect3_run_at_that_overflows_in_utc_is_400(api):
    response = api.post("/v1/jobs", once_body(runAt="0001-01-01T00:00:00+01:00"), format="json")
    assert response.status_code == 400
    assert "runAt" in response.json()


# --- Defect 5: updates refuse `tenant` as create does ------------------------------------------


@pytest.mark.parametrize("method", ["patch", "put"])
@pytest.mark.parametrize("slug", ["globex", "acme"])
def test_defect5_update_naming_a_tenant_is_400_and_changes_nothing(api, tenant, other_tenant, make_job, method, slug):
    job = make_job(tenant, name="before")
    response = getattr(api, method)(f"/v1/jobs/{job.pk}", {"tenant": slug, "name": "after"}, format="json")
    assert response.status_code == 400
    assert "tenant" in response.json()
    job.refresh_from_db()
    assert (job.name, job.tenant_id) == ("before", tenant.pk)


@pytest.mark.parametrize("method", ["patch", "put"])
def test_defect5_update_with_an_unknown_field_is_400_like_create(api, tenant, make_job, method):
    job = make_job(tenant, name="before")
    response = getattr(api, method)(f"/v1/jobs/{job.pk}", {"nmae": "after"}, format="json")
    assert response.status_code == 400
    unknown = {"nmae": ["unknown field"], "code": "invalid", "detail": "nmae: unknown field"}
    assert response.json() == unknown
    assert api.post("/v1/jobs", once_body(nmae="x"), format="json").json() == unknown


# --- Defect 11: payloads are checked against their handler's declared shape ---------------------


@pytest.mark.parametrize(
    ("target", "payload", "errors"),
    [
        ({"handler": "sleep"}, {"seconds": "abc"}, {"seconds": ["A valid number is required."]}),
        ({"handler": "sleep"}, {"seconds": -1}, {"seconds": ["Ensure this value is greater than or equal to 0."]}),
        ({"handler": "http"}, {}, {"url": ["This field is required."]}),
        ({"handler": "http"}, {"url": "ftp://example.com/x"}, None),
        ({"handler": "http"}, {"url": "https://example.com", "method": "BREW"}, None),
        ({"handler": "http"}, {"url": "https://example.com", "timeoutSec": 0}, None),
        ({"handler": "fail"}, {"failTimes": "twice"}, {"failTimes": ["A valid integer is required."]}),
        ({"handler": "sleep"}, {"secnds": 5}, {"secnds": ["unknown field"]}),
    ],
)
def test_defect11_create_with_a_payload_that_does_not_fit_its_handler_is_400(api, target, payload, errors):
    response = api.post("/v1/jobs", once_body(target=target, payload=payload), format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == ["payload", "code", "detail"]
    assert body["code"] == "invalid" and body["detail"].startswith("payload.")
    if errors is not None:
        assert body["payload"] == errors
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("handler", "payload"),
    [
        ("noop", {"anything": [1, {"goes": None}]}),
        ("sleep", {}),
        ("sleep", {"seconds": 0.5}),
        ("fail", {"failTimes": 1, "message": "upstream 503"}),
        ("http", {"url": "https://example.com/hook", "method": "post", "headers": {"X-A": "1"}, "body": [1]}),
    ],
)
def test_defect11_payloads_that_fit_are_accepted(api, handler, payload):
    response = api.post("/v1/jobs", once_body(target={"handler": handler}, payload=payload), format="json")
    assert response.status_code == 201, response.content


def test_defect11_update_checks_the_payload_against_the_jobs_handler(api, tenant, make_job):
    job = make_job(tenant, handler="sleep", payload={"seconds": 1})
    response = api.patch(f"/v1/jobs/{job.pk}", {"payload": {"seconds": "abc"}}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "payload": {"seconds": ["A valid number is required."]},
        "code": "invalid",
        "detail": "payload.seconds: A valid number is required.",
    }
    job.refresh_from_db()
    assert job.payload == {"seconds": 1}


def test_defect11_changing_the_handler_checks_the_kept_payload_against_the_new_one(api, tenant, make_job):
    job = make_job(tenant, handler="noop", payload={})
    response = api.patch(f"/v1/jobs/{job.pk}", {"target": {"handler": "http"}}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "payload": {"url": ["This field is required."]},
        "code": "invalid",
        "detail": "payload.url: This field is required.",
    }
    job.refresh_from_db()
    assert job.handler == "noop"


def test_defect11_a_registered_handler_can_declare_its_payload(api, settings):
    from rest_framework import serializers

    from jobs import registry

    class InvoicePayload(serializers.Serializer):
        invoiceId = serializers.IntegerField()

    registry.register("test-invoice", payload=InvoicePayload)(lambda ctx: None)
    try:
        target = {"handler": "test-invoice"}
        response = api.post("/v1/jobs", once_body(target=target, payload={}), format="json")
        assert response.json() == {
            "payload": {"invoiceId": ["This field is required."]},
            "code": "invalid",
            "detail": "payload.invoiceId: This field is required.",
        }
        response = api.post("/v1/jobs", once_body(target=target, payload={"invoiceId": 7}), format="json")
        assert response.status_code == 201
    finally:
        registry._handlers.pop("test-invoice")


# --- Newcomer papercuts ---------------------------------------------------------------------------


def test_papercut_the_api_root_is_an_index_without_a_token(client):
    response = client.get("/v1/")
    assert response.status_code == 200
    endpoints = response.json()["endpoints"]
    assert endpoints["jobs"]["url"] == "http://testserver/v1/jobs"
    assert endpoints["schema"]["url"] == "http://testserver/v1/schema"
    assert endpoints["docs"]["url"] == "http://testserver/v1/docs"


def test_papercut_an_oversized_body_names_the_documented_limit(api, settings):
    """A payload over TICKWORK_MAX_PAYLOAD_BYTES names that limit; a body over the request
    limit names that one and how it is made up, so 81920 is no longer a mystery."""
    response = api.post("/v1/jobs", once_body(payload={"x": "a" * 70_000}), format="json")
    assert response.status_code == 400
    assert "the limit is 65536" in response.json()["payload"][0]
    response = api.post("/v1/jobs", once_body(payload={"x": "a" * 200_000}), format="json")
    assert response.status_code == 400
    message = response.json()["payload"][0]
    assert "at most 81920 bytes" in message
    assert "65536 bytes, TICKWORK_MAX_PAYLOAD_BYTES, plus 16384 for the other fields" in message


@pytest.mark.parametrize(
    ("changes", "path", "valid"),
    [
        ({"type": "WEEKLY"}, ("type",), "ONCE, DELAYED, CRON"),
        ({"priority": "URGENT"}, ("priority",), "HIGH, NORMAL, LOW"),
        ({"misfirePolicy": "SOMETIMES"}, ("misfirePolicy",), "RUN_ONCE, RUN_ALL, SKIP"),
        ({"concurrencyPolicy": "MAYBE"}, ("concurrencyPolicy",), "ALLOW, FORBID, REPLACE"),
        ({"retryPolicy": {"backoff": "LINEAR"}}, ("retryPolicy", "backoff"), "EXPONENTIAL, FIXED"),
    ],
)
def test_papercut_an_invalid_choice_lists_the_valid_ones(api, changes, path, valid):
    body = api.post("/v1/jobs", once_body(**changes), format="json").json()
    for name in path:
        body = body[name]
    assert valid in body[0]


def test_papercut_a_filter_with_an_invalid_choice_lists_the_valid_ones(api):
    assert "ACTIVE, PAUSED, CANCELLED, COMPLETED" in api.get("/v1/jobs", {"state": "NOPE"}).json()["state"][0]
    assert "DEAD" in api.get("/v1/executions", {"state": "NOPE"}).json()["state"][0]


def test_papercut_preview_with_a_bad_schedule_and_a_bad_timezone_reports_both(client):
    response = client.get("/v1/schedule/preview", {"schedule": "61 * * * *", "timezone": "Mars/Olympus"})
    assert response.status_code == 400
    assert set(response.json()) == {"schedule", "timezone", "code", "detail"}
    assert response.json()["code"] == "invalid"
    assert response.json()["detail"].endswith("(and 1 more)")


def test_papercut_triggering_a_paused_job_says_to_resume_it(api, tenant, make_job):
    job = make_job(tenant)
    api.post(f"/v1/jobs/{job.pk}/pause")
    response = api.post(f"/v1/jobs/{job.pk}/trigger")
    assert response.status_code == 409
    assert response.json() == {"detail": "the job is paused; resume it first", "code": "conflict"}


def test_papercut_a_failed_re_drive_of_a_dead_run_logs_a_true_count(tenant, make_job, drive):
    """Attempt 3 of a 2-attempt policy is the re-drive's one extra attempt, not '3 of 2'."""
    job = make_job(tenant, handler="fail", max_attempts=2)
    execution = job.executions.get()
    now = timezone.now()
    for _ in range(2):
        execution = drive(execution, "FAILED")
        execution_settle_failure(execution_id=execution.pk, failed_state=ExecutionState.FAILED, now=now)
    execution.refresh_from_db()
    assert (execution.state, execution.attempt) == ("DEAD", 2)
    execution = execution_redrive(execution=execution, now=now)
    execution = drive(execution, "FAILED")
    execution_settle_failure(execution_id=execution.pk, failed_state=ExecutionState.FAILED, now=now)
    last = Execution.objects.get(pk=execution.pk).events.order_by("-id").first()
    assert last.to_state == "DEAD"
    assert last.message == "attempts exhausted (attempt 3, re-driven after the policy's 2; no retries left)"
