"""Issue 33: GET /v1/handlers, the handlers this server runs, each with its pool, `atomic`, its
docstring's first paragraph and its payload as JSON Schema, paged like the other lists; and the
dashboard's job form, which offers the same list."""

import pytest
from rest_framework import serializers
from rest_framework.test import APIClient

from jobs import registry
from jobs.payloads import StrictSerializer

pytestmark = pytest.mark.django_db


class _Address(serializers.Serializer):
    city = serializers.CharField(max_length=50)
    zip = serializers.CharField(required=False, allow_null=True)


class InvoicePayload(StrictSerializer):
    """An invoice to send.

    Its second paragraph is not the description."""

    invoiceId = serializers.IntegerField(min_value=1)
    channel = serializers.ChoiceField(choices=["email", "post"], required=False, allow_null=True)
    billTo = _Address(required=False)
    cc = serializers.ListField(child=serializers.EmailField(), required=False)
    dryRun = serializers.BooleanField(required=False, help_text="Render it, send nothing.")


@pytest.fixture
def invoice_handler():
    def send_invoice(ctx):
        """Sends the invoice
        by its channel.

        Retries are safe: the invoice's id is the idempotency key."""

    registry.register("test-invoice", pool="billing", atomic=True, payload=InvoicePayload, rate_limit="invoices")(
        send_invoice
    )
    yield
    registry._handlers.pop("test-invoice")


def _all(api, **query) -> list[dict]:
    response = api.get("/v1/handlers", query)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_the_built_in_handlers_are_listed_by_name_with_their_pool_and_description(api):
    handlers = {h["name"]: h for h in _all(api)}
    assert list(handlers) == sorted(handlers)
    assert {"noop", "sleep", "fail", "http", "celery"} <= handlers.keys()
    assert handlers["noop"] == {
        "name": "noop",
        "pool": "default",
        "atomic": False,
        "rateLimit": None,
        "description": "Returns its payload.",
        "payloadSchema": {"type": "object"},
    }
    assert handlers["sleep"]["description"] == "Sleeps `seconds` (default 1), stopping at once when cancelled."
    assert handlers["sleep"]["payloadSchema"] == {
        "type": "object",
        "properties": {"seconds": {"type": "number", "format": "double", "minimum": 0, "maximum": 7 * 86400}},
        "additionalProperties": False,
    }
    http = handlers["http"]["payloadSchema"]
    assert http["required"] == ["url"] and http["additionalProperties"] is False
    assert set(http["properties"]) == {"url", "method", "headers", "body", "timeoutSec"}
    assert handlers["fail"]["payloadSchema"]["properties"]["failTimes"] == {"type": ["integer", "null"], "minimum": 0}


def test_a_registered_handler_s_serializer_is_its_payload_s_json_schema(api, invoice_handler):
    (invoice,) = [h for h in _all(api) if h["name"] == "test-invoice"]
    assert (invoice["pool"], invoice["atomic"], invoice["rateLimit"]) == ("billing", True, "invoices")
    assert invoice["description"] == "Sends the invoice by its channel."
    schema = invoice["payloadSchema"]
    assert schema["description"] == "An invoice to send."
    assert schema["required"] == ["invoiceId"]
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["invoiceId"] == {"type": "integer", "minimum": 1}
    assert properties["channel"]["enum"] == ["email", "post", None]
    assert properties["billTo"]["type"] == "object"  # a nested serializer, inlined: no $ref to resolve
    assert properties["billTo"]["required"] == ["city"]
    assert properties["billTo"]["properties"]["zip"]["type"] == ["string", "null"]
    assert properties["cc"] == {"type": "array", "items": {"type": "string", "format": "email", "minLength": 1}}
    assert properties["dryRun"] == {"type": "boolean", "description": "Render it, send nothing."}
    assert "$ref" not in str(schema) and "nullable" not in str(schema)


def test_the_payload_schema_holds_what_the_api_accepts(api, invoice_handler):
    """The schema is the serializer's: a payload it describes is accepted, one it refuses is refused."""
    jsonschema = pytest.importorskip("jsonschema")
    (invoice,) = [h for h in _all(api) if h["name"] == "test-invoice"]
    schema = invoice["payloadSchema"]
    good = {"invoiceId": 7, "channel": None, "billTo": {"city": "Lyon"}, "cc": ["a@example.com"]}
    jsonschema.validate(good, schema)
    body = {"name": "i", "type": "DELAYED", "delaySec": 60, "target": {"handler": "test-invoice"}, "payload": good}
    assert api.post("/v1/jobs", body, format="json").status_code == 201
    bad = {**good, "invoiceNo": 7}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    assert api.post("/v1/jobs", {**body, "payload": bad}, format="json").status_code == 400


def test_handlers_are_paged_like_the_other_lists(api, invoice_handler):
    everyone = [h["name"] for h in _all(api)]
    seen, page = [], api.get("/v1/handlers", {"pageSize": 2}).json()
    assert page["previous"] is None
    while True:
        assert len(page["results"]) <= 2
        seen += [h["name"] for h in page["results"]]
        if page["next"] is None:
            break
        page = api.get(page["next"]).json()
    assert seen == everyone
    back = api.get(page["previous"]).json()
    assert [h["name"] for h in back["results"]] == everyone[-len(page["results"]) - 2 : -len(page["results"])]
    assert api.get("/v1/handlers", {"cursor": "nope"}).status_code == 404
    assert api.get("/v1/handlers", {"pool": "default"}).json()["pool"][0].startswith("unknown parameter")


def test_handlers_need_a_token(api):
    assert APIClient().get("/v1/handlers").status_code == 401


def test_the_job_form_offers_the_handlers_with_their_pool_and_description(admin_client, invoice_handler):
    html = admin_client.get("/dashboard/jobs/new").content.decode()
    assert "data-handler-select" in html
    assert (
        '<option value="test-invoice" data-pool="billing" data-rate-limit="invoices" '
        'data-description="Sends the invoice by its channel." '
        'data-payload="invoiceId (required), channel, billTo, cc, dryRun" >test-invoice · billing</option>'
    ) in html
    # The chosen one (noop, a new job's default) is described under the choice.
    assert '<small class="muted" data-handler-about>Returns its payload. Payload: any JSON object.</small>' in html
    assert "Handler's default (default)</option>" in html
