"""Delivery that fails: recorded, retried with a growing pause for a bounded number of attempts,
then FAILED with its error (visible in GET /v1/alerts); never blocking evaluation. Private
addresses are refused as the `http` handler refuses them. Global rules sign with the setting."""

import time
from datetime import timedelta

from django.core import mail
from django.utils import timezone

from alerts.models import AlertRule, Notification
from tenants import signing
from tenants.services import signing_secret_rotate
from testing.steps import alerter_pass


def _rule(tenant, url, **fields):
    return AlertRule.objects.create(
        tenant=tenant,
        name="r",
        kind="NO_WORKERS",
        pool="default",  # no worker is registered: one subject, one alert
        channels=[{"type": "webhook", "url": url}],
        **fields,
    )


def test_a_failing_webhook_is_retried_then_failed_and_shown(api, tenant, receiver, settings):
    settings.TICKWORK_ALERTS_DELIVERY_ATTEMPTS = 3
    receiver.status = 500
    _rule(tenant, receiver.url)
    now = timezone.now()

    first = alerter_pass(now)
    notification = Notification.objects.get()
    assert first["alert_evaluation"].fired == 1 and first["alert_delivery"].retried == 1
    assert notification.state == "PENDING" and notification.attempts == 1 and "500" in notification.last_error

    assert alerter_pass(now + timedelta(seconds=1))["alert_delivery"].total() == 0  # not yet: it waits 5 s
    alerter_pass(now + timedelta(minutes=1))
    alerter_pass(now + timedelta(minutes=2))
    notification.refresh_from_db()
    assert notification.state == "FAILED" and notification.attempts == 3
    assert len(receiver.requests) == 3
    shown = api.get("/v1/alerts").json()["results"][0]["notifications"][0]
    assert shown["state"] == "FAILED" and shown["attempts"] == 3 and "500" in shown["lastError"]


def test_a_private_address_is_refused_unless_allowed(tenant, settings):
    settings.TICKWORK_HTTP_ALLOW_PRIVATE = False
    _rule(tenant, "http://127.0.0.1:9/hook")

    alerter_pass(timezone.now())

    notification = Notification.objects.first()
    assert "127.0.0.1 is" in notification.last_error and notification.attempts == 1


def test_a_global_rule_signs_with_the_alerts_signing_secret(receiver, settings, db):
    settings.TICKWORK_ALERTS_SIGNING_SECRET = "s3cret"
    _rule(None, receiver.url)

    alerter_pass(timezone.now())

    assert receiver.requests
    for request in receiver.requests:
        assert signing.verify(
            request.headers[signing.SIGNATURE_HEADER], request.body, secrets=["s3cret"], now=time.time()
        )
        assert request.json()["tenant"] is None


def test_a_failing_email_does_not_stop_the_webhook_or_the_evaluation(tenant, receiver, settings):
    settings.EMAIL_BACKEND = "alerts.tests.test_delivery.BrokenEmailBackend"
    AlertRule.objects.create(
        tenant=tenant,
        name="r",
        kind="NO_WORKERS",
        pool="default",
        channels=[{"type": "email", "to": "a@example.com"}, {"type": "webhook", "url": receiver.url}],
    )

    result = alerter_pass(timezone.now())

    assert (
        result["alert_evaluation"].fired == 1
        and result["alert_delivery"].sent == 1
        and result["alert_delivery"].retried == 1
    )
    assert len(receiver.requests) == 1 and not mail.outbox
    assert "SMTP is down" in Notification.objects.get(channel_type="email").last_error


class BrokenEmailBackend:
    def __init__(self, *args, **kwargs):
        pass

    def send_messages(self, messages):
        raise OSError("SMTP is down")


def test_a_tenants_rule_signs_with_both_secrets_while_a_rotation_settles(tenant, receiver, db):
    """Issue 31, item 14: after `signing_secret SLUG --rotate`, for a day, a receiver verifies an
    alert webhook with the old secret or the new one."""
    old = tenant.signing_secret
    new = signing_secret_rotate(tenant=tenant, now=timezone.now())
    _rule(tenant, receiver.url)

    alerter_pass(timezone.now())

    (request,) = receiver.requests
    for secret in (old, new):
        assert signing.verify(
            request.headers[signing.SIGNATURE_HEADER], request.body, secrets=[secret], now=time.time()
        ), secret
