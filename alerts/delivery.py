"""Sending notifications: due PENDING rows are claimed, sent outside any transaction, and marked
SENT, or retried with a growing pause until TICKWORK_ALERTS_DELIVERY_ATTEMPTS have failed (then
FAILED, with the last error, which GET /v1/alerts shows).

A claim moves the row's next attempt past the time a send can take (CLAIM_SECONDS), in a short
transaction (SKIP LOCKED on PostgreSQL; SQLite has one writer at a time): two alerters never send
the same row at once. An alerter that dies between sending and saying so leaves the row to be sent
again after the claim: delivery is at least once, and each webhook carries an `Idempotency-Key`
(the alert, the event) for a receiver to drop a repeat.

Webhooks go through the `http` handler's code (outbound/http_call.py): the same refusal of private
addresses (TICKWORK_HTTP_ALLOW_PRIVATE), no redirects, a bounded time, and the same
`X-Tickwork-Signature`, made with the rule's tenant's signing secret, or for a global rule with
TICKWORK_ALERTS_SIGNING_SECRET.
"""

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from alerts import transitions
from alerts.models import Alert, Notification, NotificationEvent
from alerts.states import NotificationState
from outbound.http_call import perform_request
from tenants.selectors import signing_secrets_now

logger = logging.getLogger(__name__)
BATCH = 50
# Past the longest a send may take: a claimed row is someone's until then.
CLAIM_SECONDS = 120.0
RETRY_FIRST_SECONDS = 5.0
RETRY_MAX_SECONDS = 300.0


@dataclass
class DeliveryResult:
    sent: int = 0
    retried: int = 0
    failed: int = 0

    def total(self) -> int:
        return self.sent + self.retried + self.failed


def signing_secrets_for(alert: Alert) -> list[str]:
    """The rule's tenant's signing secrets (as its `http` jobs are signed with: its secret, and
    for a day after a rotation the previous one too), or for a global rule
    TICKWORK_ALERTS_SIGNING_SECRET; unset, one derived from SECRET_KEY (set the setting to verify
    global rules' webhooks)."""
    if alert.rule.tenant is not None:
        return signing_secrets_now(slug=alert.rule.tenant.slug)
    configured = settings.TICKWORK_ALERTS_SIGNING_SECRET
    return [configured or hashlib.sha256(f"tickwork-alerts:{settings.SECRET_KEY}".encode()).hexdigest()]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def message(notification: Notification) -> dict[str, Any]:
    """The webhook's JSON body; the email says the same in words."""
    alert, rule = notification.alert, notification.alert.rule
    resolved = notification.event == NotificationEvent.RESOLVED
    return {
        "alertId": str(alert.pk),
        "ruleId": str(rule.pk),
        "ruleName": rule.name,
        "kind": rule.kind,
        "state": "RESOLVED" if resolved else "FIRING",
        "firedAt": _iso(alert.fired_at),
        "resolvedAt": _iso(alert.resolved_at) if resolved else None,
        "summary": alert.resolved_summary if resolved and alert.resolved_summary else alert.summary,
        "firingSummary": alert.summary,
        "subject": alert.subject,
        "tenant": rule.tenant.slug if rule.tenant else None,
    }


def send(notification: Notification) -> None:
    """One attempt; raises with a message to record on failure."""
    body = message(notification)
    if notification.channel_type == "webhook":
        perform_request(
            method="POST",
            url=notification.target,
            body=body,
            secrets=signing_secrets_for(notification.alert),
            timeout=settings.TICKWORK_ALERTS_WEBHOOK_TIMEOUT_SECONDS,
            allow_private=settings.TICKWORK_HTTP_ALLOW_PRIVATE,
            idempotency_key=f"{notification.alert_id}:{notification.event}",
        )
        return
    subject = f"[Tickwork] {body['state']}: {body['ruleName']} ({body['subject']})"
    lines = [
        body["summary"],
        "",
        f"Rule: {body['ruleName']} ({body['kind']}, {body['ruleId']})",
        f"Tenant: {body['tenant'] or 'all (a global rule)'}",
        f"Alert: {body['alertId']}",
        f"Fired at: {body['firedAt']}",
    ]
    if body["resolvedAt"]:
        lines += [f"Resolved at: {body['resolvedAt']}", f"When it fired: {body['firingSummary']}"]
    send_mail(subject, "\n".join(lines) + "\n", None, [notification.target], fail_silently=False)


def _claim(*, now: datetime, limit: int) -> list[Notification]:
    with transaction.atomic():
        # SKIP LOCKED on PostgreSQL (of the notification only: not its rule's and tenant's rows);
        # Django leaves FOR UPDATE out on SQLite, whose one writer at a time serialises the claim,
        # as the executions' set moves do (executions/transitions.py).
        due = (
            Notification.objects.filter(state=NotificationState.PENDING, next_attempt_at__lte=now)
            .order_by("next_attempt_at", "id")
            .select_for_update(skip_locked=True, of=("self",))
        )
        claimed = list(due.select_related("alert__rule__tenant")[:limit])
        if claimed:
            Notification.objects.filter(pk__in=[n.pk for n in claimed]).update(
                next_attempt_at=now + timedelta(seconds=CLAIM_SECONDS)
            )
    return claimed


def deliver_due(*, now: datetime, clock=None) -> DeliveryResult:
    """Send what is due at `now`. `clock` gives the time each outcome is recorded at (default `now`)."""
    result = DeliveryResult()
    attempts_allowed = max(1, settings.TICKWORK_ALERTS_DELIVERY_ATTEMPTS)
    for notification in _claim(now=now, limit=BATCH):
        attempt = notification.attempts + 1
        try:
            send(notification)
        except Exception as exc:  # any failure is the channel's (HttpCallError, SMTP, DNS), never the loop's
            error = str(exc).strip()[:1000] or exc.__class__.__name__
            at = clock() if clock else now
            if attempt >= attempts_allowed:
                transitions.failed(notification_id=notification.pk, attempts=attempt, error=error)
                result.failed += 1
                logger.error(
                    "alert notification %s to %s failed for good: %s", notification.pk, notification.target, error
                )
            else:
                pause = min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** (attempt - 1))
                Notification.objects.filter(pk=notification.pk).update(
                    attempts=attempt, last_error=error, next_attempt_at=at + timedelta(seconds=pause)
                )
                result.retried += 1
                logger.warning(
                    "alert notification %s to %s failed (attempt %d): %s",
                    notification.pk,
                    notification.target,
                    attempt,
                    error,
                )
            continue
        transitions.sent(notification_id=notification.pk, attempts=attempt, at=clock() if clock else now)
        result.sent += 1
    return result
