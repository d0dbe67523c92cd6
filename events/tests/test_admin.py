"""Events in the admin: listed and shown, never added or changed there."""

import pytest
from django.utils import timezone

from events.models import EventSource
from events.services import event_receive

pytestmark = pytest.mark.django_db


def test_an_event_is_listed_and_shown_read_only(admin_client, tenant):
    event = event_receive(
        tenant=tenant, name="invoice.paid", payload={"n": 1}, source=EventSource.API, now=timezone.now()
    ).event

    listed = admin_client.get("/admin/events/event/")
    shown = admin_client.get(f"/admin/events/event/{event.pk}/change/")

    assert listed.status_code == 200 and b"invoice.paid" in listed.content
    assert shown.status_code == 200 and b"invoice.paid" in shown.content
    assert b'name="_save"' not in shown.content
    assert admin_client.get("/admin/events/event/add/").status_code == 403


def test_the_tenant_admin_shows_no_inbound_secret(admin_client, tenant):
    from tenants.services import inbound_secret_ensure

    secret = inbound_secret_ensure(tenant=tenant)

    page = admin_client.get(f"/admin/tenants/tenant/{tenant.pk}/change/")

    assert page.status_code == 200
    assert secret.encode() not in page.content
