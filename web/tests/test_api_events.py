"""POST /v1/events, GET /v1/events and /v1/events/{id}: an event starts a run of each of the
tenant's ACTIVE event jobs it matches, answers 202 with what it started, and is kept to be read."""

import json

import pytest
from django.utils import timezone

from events.models import Event
from events.tests.factories import event_job, workflow_event_job
from executions.models import Execution
from scheduling.job_changes import job_pause

pytestmark = pytest.mark.django_db

MAX_DEPTH = 32  # web.json_input's nesting limit


def nested(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


def post(api, body, **headers):
    return api.post("/v1/events", body, format="json", **headers)


def post_raw(api, text: str):
    return api.post("/v1/events", data=text.encode(), content_type="application/json")


def test_an_event_answers_202_with_the_executions_it_started_and_they_can_be_read(api, tenant):
    eur = event_job(tenant, name="eur invoices", event_filter={"currency": "EUR"})
    event_job(tenant, name="usd invoices", event_filter={"currency": "USD"})

    response = post(api, {"name": "invoice.paid", "payload": {"invoice": "in_1", "currency": "EUR"}})

    assert response.status_code == 202, response.content
    body = response.json()
    assert set(body) == {"eventId", "matched", "executionIds", "runIds"}
    assert body["matched"] == 1 and body["runIds"] == []
    [execution_id] = body["executionIds"]
    execution = api.get(f"/v1/executions/{execution_id}").json()
    assert (execution["jobId"], execution["state"], execution["origin"]) == (str(eur.pk), "PENDING", "EVENT")
    detail = api.get(f"/v1/events/{body['eventId']}")
    assert detail.status_code == 200
    assert detail.json() == {
        "eventId": body["eventId"],
        "name": "invoice.paid",
        "payload": {"invoice": "in_1", "currency": "EUR"},
        "receivedAt": detail.json()["receivedAt"],
        "source": "api",
        "matched": 1,
        "executionIds": [execution_id],
        "runIds": [],
    }
    assert detail.json()["receivedAt"].endswith("Z")


def test_a_workflow_event_job_answers_its_run_and_every_step(api, tenant):
    workflow_event_job(tenant)

    body = post(api, {"name": "invoice.paid"}).json()

    assert body["matched"] == 1
    assert len(body["runIds"]) == 1 and len(body["executionIds"]) == 2


def test_an_event_that_matches_nothing_is_stored_and_says_so(api):
    response = post(api, {"name": "nobody.listens"})

    assert response.status_code == 202
    assert response.json()["matched"] == 0 and response.json()["executionIds"] == []
    assert Event.objects.get().payload == {}


def test_a_paused_event_job_does_not_start(api, tenant):
    job_pause(job=event_job(tenant), now=timezone.now())

    assert post(api, {"name": "invoice.paid"}).json()["matched"] == 0
    assert not Execution.objects.exists()


def test_the_filter_is_type_sensitive_through_the_api(api, tenant):
    event_job(tenant, event_filter={"attempt": 1})

    assert post(api, {"name": "invoice.paid", "payload": {"attempt": "1"}}).json()["matched"] == 0
    assert post(api, {"name": "invoice.paid", "payload": {"attempt": 1}}).json()["matched"] == 1


# --- Idempotency ------------------------------------------------------------------------------------


def test_the_same_key_again_answers_the_same_and_starts_nothing(api, tenant):
    event_job(tenant)
    body = {"name": "invoice.paid", "payload": {"invoice": "in_1"}}

    first = post(api, body, HTTP_IDEMPOTENCY_KEY="in_1-paid")
    again = post(api, body, HTTP_IDEMPOTENCY_KEY="in_1-paid")

    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    assert (Event.objects.count(), Execution.objects.count()) == (1, 1)


def test_the_same_key_with_another_body_is_409_and_starts_nothing(api, tenant):
    event_job(tenant)
    post(api, {"name": "invoice.paid", "payload": {"invoice": "in_1"}}, HTTP_IDEMPOTENCY_KEY="k")

    response = post(api, {"name": "invoice.paid", "payload": {"invoice": "in_2"}}, HTTP_IDEMPOTENCY_KEY="k")

    assert response.status_code == 409
    assert response.json()["field"] == "Idempotency-Key"
    assert (Event.objects.count(), Execution.objects.count()) == (1, 1)


def test_without_a_key_each_post_is_an_event_of_its_own(api, tenant):
    event_job(tenant)

    post(api, {"name": "invoice.paid"})
    post(api, {"name": "invoice.paid"}, HTTP_IDEMPOTENCY_KEY="")

    assert (Event.objects.count(), Execution.objects.count()) == (2, 2)


def test_a_key_longer_than_255_characters_is_400(api):
    response = post(api, {"name": "invoice.paid"}, HTTP_IDEMPOTENCY_KEY="k" * 256)

    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()
    assert not Event.objects.exists()


# --- Validation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"payload": {}}, "name"),
        ({"name": ""}, "name"),
        ({"name": "a" * 201}, "name"),
        ({"name": "invoice paid"}, "name"),
        ({"name": "invoice/paid"}, "name"),
        ({"name": "facture.payée"}, "name"),
        ({"name": 7}, "name"),
        ({"name": "invoice.paid", "payload": []}, "payload"),
        ({"name": "invoice.paid", "payload": "text"}, "payload"),
        ({"name": "invoice.paid", "payload": None}, "payload"),
        ({"name": "invoice.paid", "data": {}}, "data"),
        ({"name": "invoice.paid", "tenant": "globex"}, "tenant"),
    ],
)
def test_a_bad_body_is_400_naming_the_field_and_stores_nothing(api, tenant, body, field):
    event_job(tenant)

    response = post(api, body)

    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not Event.objects.exists() and not Execution.objects.exists()


def test_names_of_the_allowed_characters_and_length_are_accepted(api):
    for name in ("invoice.paid", "billing:refund_issued-v2", "A" * 200, "x"):
        assert post(api, {"name": name}).status_code == 202, name


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"name": "invoice.paid", "payload": {"note": "a\\u0000b"}}', "payload"),
        ('{"name": "invoice.paid", "payload": {"a\\u0000": 1}}', "payload"),
        ('{"name": "invoice.paid", "payload": {"note": "\\ud800"}}', "payload"),
        ('{"name": "invoice.paid", "payload": {"big": 1e400}}', "payload"),
        ('{"name": "invoice\\u0000paid"}', "name"),
        ('{"name": "\\udfff"}', "name"),
        ('{"name": "invoice.paid", "payload": ' + nested(MAX_DEPTH + 1) + "}", "payload"),
    ],
)
def test_unstorable_or_too_deep_json_is_400_naming_the_field(api, text, field):
    response = post_raw(api, text)

    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not Event.objects.exists()


def test_malformed_json_is_400(api):
    response = post_raw(api, '{"name": "invoice.paid",')

    assert response.status_code == 400
    assert "detail" in response.json()
    assert not Event.objects.exists()


def test_a_payload_over_the_limit_is_400_naming_it(api, settings):
    settings.TICKWORK_MAX_PAYLOAD_BYTES = 1000

    response = post(api, {"name": "invoice.paid", "payload": {"blob": "x" * 1000}})
    huge = post_raw(api, json.dumps({"name": "invoice.paid", "payload": {"blob": "x" * 100_000}}))

    assert response.status_code == 400 and "1000" in response.json()["payload"][0]
    assert huge.status_code == 400 and "payload" in huge.json()
    assert not Event.objects.exists()


# --- Reading ----------------------------------------------------------------------------------------


def test_the_list_is_newest_first_paginated_and_filtered_by_name(api):
    for name in ("a.one", "b.two", "a.one"):
        post(api, {"name": name})

    page = api.get("/v1/events", {"pageSize": 2}).json()
    rest = api.get(page["next"]).json()
    named = api.get("/v1/events", {"name": "a.one"}).json()

    events = list(Event.objects.order_by("-received_at"))
    assert [e["eventId"] for e in page["results"] + rest["results"]] == [str(e.pk) for e in events]
    assert rest["next"] is None
    assert [e["name"] for e in named["results"]] == ["a.one", "a.one"]
    assert set(page["results"][0]) == {
        "eventId",
        "name",
        "payload",
        "receivedAt",
        "source",
        "matched",
        "executionIds",
        "runIds",
    }


def test_the_list_filters_by_source_and_refuses_an_unknown_one(api):
    post(api, {"name": "a.one"})

    assert len(api.get("/v1/events", {"source": "api"}).json()["results"]) == 1
    assert api.get("/v1/events", {"source": "webhook"}).json()["results"] == []
    assert api.get("/v1/events", {"source": "email"}).status_code == 400
    assert api.get("/v1/events?source=").status_code == 400


@pytest.mark.parametrize("event_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_event_is_404(api, event_id):
    assert api.get(f"/v1/events/{event_id}").status_code == 404


def test_events_need_a_token(client):
    assert client.get("/v1/events").status_code == 401
    assert client.post("/v1/events", {"name": "x"}, content_type="application/json").status_code == 401
    assert not Event.objects.exists()
