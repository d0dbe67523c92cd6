"""POST /v1/hooks/{tenant}/{event}: a signed webhook acts as POST /v1/events (source `webhook`);
anything unsigned, wrongly signed, stale, from the future or for an unknown tenant is a 401 and
stores nothing."""

import json
import time
from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from events.models import Event
from events.tests.factories import event_job
from executions.clock import db_now
from executions.models import Execution
from tenants import signing
from tenants.services import inbound_secret_ensure, inbound_secret_rotate, tenant_create

pytestmark = pytest.mark.django_db

BODY = json.dumps({"invoice": "in_1", "currency": "EUR"}).encode()


@pytest.fixture
def secret(tenant) -> str:
    return inbound_secret_ensure(tenant=tenant)


def hook(body: bytes = BODY, *, tenant="acme", event="invoice.paid", signature=None, client=None, **headers):
    client = client or APIClient()
    if signature is not None:
        headers["HTTP_X_TICKWORK_SIGNATURE"] = signature
    return client.post(f"/v1/hooks/{tenant}/{event}", data=body, content_type="application/json", **headers)


def signed(secret: str, body: bytes = BODY, *, at: float | None = None) -> str:
    return signing.sign(secret, int(time.time() if at is None else at), body)


def nothing_stored() -> bool:
    return not Event.objects.exists() and not Execution.objects.exists()


def test_a_signed_webhook_stores_the_event_and_starts_what_it_matches(tenant, secret):
    job = event_job(tenant, event_filter={"currency": "EUR"})

    response = hook(signature=signed(secret))

    assert response.status_code == 202, response.content
    body = response.json()
    event = Event.objects.get()
    assert (body["eventId"], body["matched"]) == (str(event.pk), 1)
    assert (event.name, event.payload, event.source) == ("invoice.paid", json.loads(BODY), "webhook")
    execution = Execution.objects.get()
    assert body["executionIds"] == [str(execution.pk)]
    assert (execution.job_id, execution.event_id, execution.origin) == (job.pk, event.pk, "EVENT")


def test_the_event_is_listed_with_source_webhook(api, tenant, secret):
    hook(signature=signed(secret))

    [listed] = api.get("/v1/events", {"source": "webhook"}).json()["results"]
    assert (listed["name"], listed["source"]) == ("invoice.paid", "webhook")


def test_an_empty_body_is_an_empty_payload(secret):
    response = hook(b"", signature=signed(secret, b""))

    assert response.status_code == 202
    assert Event.objects.get().payload == {}


def test_a_webhook_needs_no_csrf_token(secret):
    response = hook(signature=signed(secret), client=APIClient(enforce_csrf_checks=True))

    assert response.status_code == 202


def test_the_idempotency_key_is_honoured(tenant, secret):
    event_job(tenant)
    first = hook(signature=signed(secret), HTTP_IDEMPOTENCY_KEY="delivery-1")
    again = hook(signature=signed(secret), HTTP_IDEMPOTENCY_KEY="delivery-1")
    other = b'{"invoice": "in_2"}'
    conflict = hook(other, signature=signed(secret, other), HTTP_IDEMPOTENCY_KEY="delivery-1")

    assert (first.status_code, again.status_code, conflict.status_code) == (202, 202, 409)
    assert first.json() == again.json()
    assert (Event.objects.count(), Execution.objects.count()) == (1, 1)


# --- Refused: 401, nothing stored -------------------------------------------------------------------

BAD_SIGNATURES = {
    "missing": lambda secret: None,
    "empty": lambda secret: "",
    "garbage": lambda secret: "garbage",
    "no timestamp": lambda secret: "v1=" + signing.digest(secret, int(time.time()), BODY),
    "no v1": lambda secret: f"t={int(time.time())}",
    "timestamp not a number": lambda secret: f"t=now,v1={signing.digest(secret, int(time.time()), BODY)}",
    "wrong secret": lambda secret: signed("whsec_not-the-secret"),
    "tampered body": lambda secret: signed(secret, BODY.replace(b"EUR", b"USD")),
    "stale": lambda secret: signed(secret, at=time.time() - 6 * 60),
    "future": lambda secret: signed(secret, at=time.time() + 6 * 60),
    "a day old": lambda secret: signed(secret, at=time.time() - 86400),
    "digest of the right length, wrong": lambda secret: f"t={int(time.time())},v1={'0' * 64}",
}


@pytest.mark.parametrize("kind", BAD_SIGNATURES)
def test_a_bad_signature_is_401_and_stores_nothing(tenant, secret, kind):
    event_job(tenant)

    response = hook(signature=BAD_SIGNATURES[kind](secret))

    assert response.status_code == 401, response.content
    assert "X-Tickwork-Signature" in response.json()["detail"]
    assert response.headers["WWW-Authenticate"] == "Tickwork-Signature"
    assert nothing_stored()


def test_an_unknown_tenant_is_401_like_a_bad_signature(secret):
    unknown = hook(tenant="nobody", signature=signed(secret))
    wrong = hook(signature=signed("whsec_wrong"))

    assert unknown.status_code == wrong.status_code == 401
    assert unknown.json() == wrong.json()
    assert nothing_stored()


def test_a_tenant_that_never_had_a_secret_accepts_no_webhook(tenant):
    event_job(tenant)

    assert hook(signature=signing.sign("", int(time.time()), BODY)).status_code == 401
    assert nothing_stored()


def test_a_bearer_token_is_no_substitute_for_the_signature(api, tenant, secret):
    event_job(tenant)

    response = hook(client=api)

    assert response.status_code == 401
    assert nothing_stored()


def test_a_body_over_the_limit_is_refused_unread(secret, settings):
    settings.TICKWORK_MAX_PAYLOAD_BYTES = 1000
    body = json.dumps({"blob": "x" * 50_000}).encode()

    response = hook(body, signature=signed(secret, body))

    assert response.status_code == 400
    assert "payload" in response.json()
    assert nothing_stored()


# --- A good signature, a bad body: 400 naming the field --------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"[1, 2]", "payload"),
        (b'"text"', "payload"),
        (b'{"invoice": ', "payload"),
        (b"\xff\xfe", "payload"),
        (b'{"note": "a\\u0000b"}', "payload"),
        (b'{"note": "\\ud800"}', "payload"),
        (b'{"big": NaN}', "payload"),
        (b'{"a": ' * 40 + b"1" + b"}" * 40, "payload"),
    ],
)
def test_a_signed_body_that_is_not_a_storable_json_object_is_400(secret, body, field):
    response = hook(body, signature=signed(secret, body))

    assert response.status_code == 400, response.content
    assert field in response.json()
    assert nothing_stored()


def test_a_signed_payload_over_the_payload_limit_is_400(secret, settings):
    settings.TICKWORK_MAX_PAYLOAD_BYTES = 1000
    # Within the body's limit (the payload's and room besides), over the payload's once compact.
    body = json.dumps({"blob": "x" * 1200}).encode()

    response = hook(body, signature=signed(secret, body))

    assert response.status_code == 400
    assert "1000" in response.json()["payload"][0]
    assert nothing_stored()


@pytest.mark.parametrize("event", ["invoice%20paid", "facture.pay%C3%A9e", "a" * 201])
def test_a_bad_event_name_in_the_path_is_400(secret, event):
    response = hook(event=event, signature=signed(secret))

    assert response.status_code == 400, response.content
    assert "event_name" in response.json()
    assert nothing_stored()


# --- Rotation (time injected: the rotation is placed in the past) -----------------------------------


def rotate_at(tenant, when):
    """Rotate the tenant's secret as if it had been done at `when`; returns (old, new)."""
    old = inbound_secret_ensure(tenant=tenant)
    return old, inbound_secret_rotate(tenant=tenant, now=when)


def test_a_rotated_out_secret_still_verifies_within_the_hour(tenant):
    old, new = rotate_at(tenant, db_now() - timedelta(minutes=59))

    assert hook(signature=signed(old)).status_code == 202
    assert hook(signature=signed(new)).status_code == 202


def test_a_rotated_out_secret_no_longer_verifies_after_the_hour(tenant):
    old, new = rotate_at(tenant, db_now() - timedelta(minutes=61))

    assert hook(signature=signed(old)).status_code == 401
    assert Event.objects.count() == 0
    assert hook(signature=signed(new)).status_code == 202


def test_a_sender_may_sign_with_both_secrets_while_moving_over(tenant):
    old, new = rotate_at(tenant, db_now() - timedelta(minutes=61))
    now = int(time.time())
    both = f"t={now},v1={signing.digest(old, now, BODY)},v1={signing.digest(new, now, BODY)}"

    assert hook(signature=both).status_code == 202


# --- Tenants apart ----------------------------------------------------------------------------------


def test_a_hook_for_one_tenant_signed_with_anothers_secret_is_401(tenant, other_tenant, secret):
    event_job(tenant)
    event_job(other_tenant)
    theirs = inbound_secret_ensure(tenant=other_tenant)

    assert hook(tenant="acme", signature=signed(theirs)).status_code == 401
    assert hook(tenant="globex", signature=signed(secret)).status_code == 401
    assert nothing_stored()


def test_a_hook_starts_only_its_own_tenants_jobs(tenant, other_tenant, secret):
    event_job(tenant)
    theirs = event_job(other_tenant)

    body = hook(signature=signed(secret)).json()

    assert body["matched"] == 1
    assert not Execution.objects.filter(job=theirs).exists()
    assert Event.objects.get().tenant == tenant


def test_tenants_secrets_differ():
    first, second = tenant_create(slug="first"), tenant_create(slug="second")

    assert inbound_secret_ensure(tenant=first) != inbound_secret_ensure(tenant=second)
