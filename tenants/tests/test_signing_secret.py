"""A tenant's signing secret (what its `http` jobs' calls and its alert webhooks are signed with):
`manage.py signing_secret SLUG` prints it, on stdout only; `--rotate` makes a new one, and for
SIGNING_ROTATION_GRACE (a day) what is sent carries a signature with each (issue 31, item 14)."""

import io
import time
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tenants import signing
from tenants.models import SIGNING_ROTATION_GRACE, Tenant
from tenants.selectors import signing_secrets, signing_secrets_now
from tenants.services import signing_secret_rotate

pytestmark = pytest.mark.django_db


def _run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("signing_secret", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_command_prints_the_secret_and_nothing_else(tenant):
    out, err = _run("acme")

    assert out == f"{tenant.signing_secret}\n" and err == ""
    assert _run("acme")[0] == out  # printing changes nothing


def test_rotate_prints_the_new_secret_and_the_old_one_signs_beside_it_for_a_day(tenant):
    old = tenant.signing_secret

    out, _ = _run("acme", "--rotate")

    tenant.refresh_from_db()
    new = out.strip()
    assert new == tenant.signing_secret != old and len(new) == len(old)
    assert tenant.signing_secret_previous == old
    assert signing_secrets_now(slug="acme") == [new, old]
    rotated_at = tenant.signing_secret_rotated_at
    assert signing_secrets(tenant=tenant, now=rotated_at + SIGNING_ROTATION_GRACE - timedelta(seconds=1)) == [new, old]
    assert signing_secrets(tenant=tenant, now=rotated_at + SIGNING_ROTATION_GRACE) == [new]


def test_a_second_rotation_within_the_day_retires_the_first_old_secret_at_once(tenant):
    """How a leaked secret is retired without waiting a day: rotate twice."""
    leaked = tenant.signing_secret
    now = timezone.now()
    middle = signing_secret_rotate(tenant=tenant, now=now)
    newest = signing_secret_rotate(tenant=tenant, now=now + timedelta(minutes=1))

    tenant.refresh_from_db()
    assert signing_secrets(tenant=tenant, now=now + timedelta(minutes=1)) == [newest, middle]
    assert leaked not in signing_secrets(tenant=tenant, now=now + timedelta(minutes=1))


def test_an_unknown_tenant_is_an_error_on_stderr(db):
    with pytest.raises(CommandError, match="no tenant 'nope'"):
        _run("nope")
    assert not Tenant.objects.exists()


def test_a_header_signed_with_both_secrets_verifies_with_either_and_not_with_another():
    body, now = b'{"x": 1}', int(time.time())

    header = signing.sign_with(["new", "old"], now, body)

    assert header.count("v1=") == 2
    for secret in ("new", "old"):
        assert signing.verify(header, body, secrets=[secret], now=now)
    assert not signing.verify(header, body, secrets=["other"], now=now)
