"""A tenant's inbound webhook secret: made once, rotated with an hour's grace for the old one."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tenants.models import INBOUND_ROTATION_GRACE, Tenant
from tenants.selectors import inbound_secrets
from tenants.services import inbound_secret_ensure, inbound_secret_rotate

pytestmark = pytest.mark.django_db


def test_a_new_tenant_has_no_inbound_secret_and_nothing_verifies(tenant):
    assert tenant.inbound_secret == ""
    assert inbound_secrets(tenant=tenant, now=timezone.now()) == []


def test_ensure_makes_one_secret_and_then_keeps_it(tenant):
    secret = inbound_secret_ensure(tenant=tenant)

    assert secret.startswith("whsec_") and len(secret) > 40
    assert inbound_secret_ensure(tenant=tenant) == secret
    assert Tenant.objects.get(pk=tenant.pk).inbound_secret == secret


def test_the_rotated_out_secret_verifies_for_an_hour_and_not_after(tenant):
    old = inbound_secret_ensure(tenant=tenant)
    rotated_at = timezone.now()

    new = inbound_secret_rotate(tenant=tenant, now=rotated_at)

    tenant.refresh_from_db()
    assert new != old
    assert inbound_secrets(tenant=tenant, now=rotated_at) == [new, old]
    assert inbound_secrets(tenant=tenant, now=rotated_at + timedelta(minutes=59)) == [new, old]
    assert inbound_secrets(tenant=tenant, now=rotated_at + INBOUND_ROTATION_GRACE) == [new]
    assert inbound_secrets(tenant=tenant, now=rotated_at + timedelta(days=1)) == [new]


def test_rotating_a_tenant_without_a_secret_gives_it_one(tenant):
    new = inbound_secret_rotate(tenant=tenant, now=timezone.now())

    tenant.refresh_from_db()
    assert inbound_secrets(tenant=tenant, now=timezone.now()) == [new]
