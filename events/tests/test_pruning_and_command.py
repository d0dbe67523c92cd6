"""The sweeper prunes events after the retention (never inside the idempotency window), and
`manage.py inbound_secret` prints, makes and rotates a tenant's inbound secret."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from events.models import Event, EventSource
from events.services import event_receive
from tenants.models import Tenant
from tenants.selectors import inbound_secrets
from testing.steps import sweeper_pass

pytestmark = pytest.mark.django_db


def test_the_sweeper_prunes_events_older_than_the_retention(tenant, settings):
    settings.TICKWORK_RETENTION_DAYS = 30
    now = timezone.now()
    for age in (timedelta(days=31), timedelta(days=29)):
        event_receive(tenant=tenant, name="invoice.paid", payload={}, source=EventSource.API, now=now - age)

    result = sweeper_pass(now)

    assert result["retention"].events_pruned == 1
    assert [e.received_at for e in Event.objects.all()] == [now - timedelta(days=29)]


def inbound_secret(*args) -> str:
    out = StringIO()
    call_command("inbound_secret", *args, stdout=out)
    return out.getvalue().strip()


def test_the_command_makes_a_secret_once_and_prints_it_again(tenant):
    secret = inbound_secret("acme")

    assert secret.startswith("whsec_")
    assert inbound_secret("acme") == secret


def test_rotate_prints_a_new_secret_and_the_old_one_lasts_an_hour(tenant):
    old = inbound_secret("acme")

    new = inbound_secret("acme", "--rotate")

    tenant = Tenant.objects.get(pk=tenant.pk)
    assert new != old and inbound_secret("acme") == new
    rotated_at = tenant.inbound_secret_rotated_at
    assert abs(rotated_at - timezone.now()) < timedelta(minutes=1)
    assert inbound_secrets(tenant=tenant, now=rotated_at + timedelta(minutes=59)) == [new, old]
    assert inbound_secrets(tenant=tenant, now=rotated_at + timedelta(minutes=61)) == [new]


def test_an_unknown_tenant_is_an_error(db):
    with pytest.raises(CommandError, match="no tenant 'nobody'"):
        inbound_secret("nobody")
