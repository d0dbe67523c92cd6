"""Tenants apart on the event endpoints: a token reads only its tenant's events (another's id is
404, lists never show them), posts only in its tenant, and its events never start another tenant's
jobs; sessions see what their tenants allow. Webhooks' tenants: web/tests/test_api_hooks.py."""

import pytest

from events.models import Event
from events.tests.factories import event_job
from executions.models import Execution

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def post(client, body, **headers):
    return client.post("/v1/events", body, format="json", **headers)


@pytest.fixture
def theirs(other_api, other_tenant) -> dict:
    """The other tenant's event job and an event it posted, which started a run of the job."""
    job = event_job(other_tenant)
    body = post(other_api, {"name": "invoice.paid", "payload": {"secret": "globex"}}).json()
    assert body["matched"] == 1
    return {"job": job, "event_id": body["eventId"]}


def test_another_tenants_event_is_404(api, theirs):
    response = api.get(f"/v1/events/{theirs['event_id']}")

    assert response.status_code == 404
    assert "globex" not in response.content.decode()


def test_the_owner_reads_it(other_api, theirs):
    assert other_api.get(f"/v1/events/{theirs['event_id']}").status_code == 200


@pytest.mark.parametrize("query", [{}, {"name": "invoice.paid"}, {"tenant": "globex"}, {"source": "api"}])
def test_the_list_shows_only_the_callers_events_whatever_the_filter(api, theirs, query):
    post(api, {"name": "invoice.paid"})

    results = api.get("/v1/events", query).json()["results"]

    assert str(theirs["event_id"]) not in {event["eventId"] for event in results}
    assert all(event["payload"] != {"secret": "globex"} for event in results)


def test_a_tokens_events_never_start_another_tenants_jobs(api, theirs):
    before = Execution.objects.filter(job=theirs["job"]).count()

    body = post(api, {"name": "invoice.paid", "payload": {"secret": "globex"}}).json()

    assert body["matched"] == 0
    assert Execution.objects.filter(job=theirs["job"]).count() == before


def test_a_token_cannot_post_in_another_tenant(api, theirs):
    response = post(api, {"name": "invoice.paid", "tenant": "globex"})

    assert response.status_code == 400
    assert "tenant" in response.json()
    assert Event.objects.count() == 1  # theirs


def test_an_idempotency_key_is_per_tenant(api, other_api, tenant, other_tenant):
    event_job(tenant)
    event_job(other_tenant)

    mine = post(api, {"name": "invoice.paid"}, HTTP_IDEMPOTENCY_KEY="k")
    other = post(other_api, {"name": "invoice.paid", "payload": {"other": 1}}, HTTP_IDEMPOTENCY_KEY="k")

    assert (mine.status_code, other.status_code) == (202, 202)
    assert mine.json()["eventId"] != other.json()["eventId"]
    assert Execution.objects.count() == 2


def test_a_staff_session_sees_every_tenants_events_and_posts_in_the_one_it_names(admin_client, tenant, theirs):
    event_job(tenant)

    listed = admin_client.get("/v1/events").json()["results"]
    unnamed = admin_client.post("/v1/events", {"name": "invoice.paid"}, content_type="application/json")
    named = admin_client.post("/v1/events", {"name": "invoice.paid", "tenant": "acme"}, content_type="application/json")

    assert [event["eventId"] for event in listed] == [theirs["event_id"]]
    assert unnamed.status_code == 400 and "tenant" in unnamed.json()
    assert named.status_code == 202 and named.json()["matched"] == 1
    assert Event.objects.get(pk=named.json()["eventId"]).tenant == tenant


def test_a_member_session_sees_only_its_tenants_events(client, django_user_model, tenant, theirs):
    user = django_user_model.objects.create_user("member", password="pw-member-1234")
    tenant.members.add(user)
    client.force_login(user)

    assert client.get("/v1/events").json()["results"] == []
    assert client.get(f"/v1/events/{theirs['event_id']}").status_code == 404
    posted = client.post("/v1/events", {"name": "invoice.paid"}, content_type="application/json")
    assert posted.status_code == 202
    assert Event.objects.get(pk=posted.json()["eventId"]).tenant == tenant
