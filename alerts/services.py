"""Writes of alerts: rules made and changed (the API's), and the evaluation that fires and resolves
alerts with their notifications.

Guarantees: an alert fires once per (rule, subject) breach and resolves once; each is notified
once per channel and event. Both hold with any number of alerters running: the FIRING row is
unique per (rule, subject) (alert_one_firing), a resolve is a conditional update from FIRING, and
the notifications are written in the same transaction as the row change, so whoever loses a race
writes none.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from alerts import facts, transitions
from alerts.evaluation import Breach
from alerts.models import Alert, AlertRule, Notification, NotificationEvent
from alerts.states import AlertState

logger = logging.getLogger(__name__)
# Names in a rule's fields that its model spells otherwise.
RULE_FIELDS = ("name", "kind", "threshold", "window_sec", "pool", "job", "channels", "enabled")


def rule_create(*, tenant, fields: dict[str, Any], actor: str) -> AlertRule:
    return AlertRule.objects.create(tenant=tenant, created_by=actor, **fields)


def rule_update(*, rule: AlertRule, fields: dict[str, Any]) -> AlertRule:
    """Changes take effect at the next evaluation: an alert of the rule whose subject no longer
    breaches the changed rule resolves then (a disabled rule's, all of them)."""
    for name, value in fields.items():
        setattr(rule, name, value)
    rule.save()
    return rule


def rule_delete(*, rule: AlertRule) -> None:
    """The rule, its alerts and their notifications (sent or not) go."""
    rule.delete()


@dataclass
class EvaluationResult:
    rules: int = 0
    fired: int = 0
    resolved: int = 0
    failed: int = 0  # rules whose evaluation raised (logged; the others were evaluated)


def evaluate_all(*, now: datetime) -> EvaluationResult:
    """Judge every rule at `now`: fire an alert for each new breaching subject, resolve each
    firing alert whose subject no longer breaches (every one of a disabled rule). One rule's
    failure is logged and does not stop the others."""
    result = EvaluationResult()
    for rule in AlertRule.objects.select_related("tenant", "job").order_by("created_at"):
        result.rules += 1
        try:
            found = facts.breaches(rule, now=now) if rule.enabled else []
            fired, resolved = apply(rule=rule, breaches=found, now=now)
        except Exception:
            logger.exception("alert rule %s (%s) could not be evaluated", rule.pk, rule.name)
            result.failed += 1
            continue
        result.fired += fired
        result.resolved += resolved
    return result


def apply(*, rule: AlertRule, breaches: list[Breach], now: datetime) -> tuple[int, int]:
    """Make the rule's alerts agree with `breaches`: returns (fired, resolved)."""
    firing = {a.subject: a for a in Alert.objects.filter(rule=rule, state=AlertState.FIRING)}
    breaching = {b.subject: b for b in breaches}
    fired = sum(alert_fire(rule=rule, breach=b, now=now) for s, b in breaching.items() if s not in firing)
    why = "the rule was disabled" if not rule.enabled else "the condition no longer holds"
    resolved = sum(
        alert_resolve(alert=a, summary=f"resolved: {why}", now=now) for s, a in firing.items() if s not in breaching
    )
    return fired, resolved


def alert_fire(*, rule: AlertRule, breach: Breach, now: datetime) -> bool:
    """A FIRING alert and its notifications, in one transaction; False when another evaluator
    fired it first (the unique FIRING row)."""
    try:
        with transaction.atomic():
            alert = Alert.objects.create(
                rule=rule, tenant_id=rule.tenant_id, subject=breach.subject, fired_at=now, summary=breach.summary
            )
            _notify(alert=alert, rule=rule, event=NotificationEvent.FIRED, now=now)
    except IntegrityError:
        return False
    logger.warning("alert FIRING: %s [%s] %s", rule.name, breach.subject, breach.summary)
    return True


def alert_resolve(*, alert: Alert, summary: str, now: datetime) -> bool:
    """FIRING → RESOLVED and its notifications, in one transaction; False when another
    evaluator resolved it first."""
    with transaction.atomic():
        moved = transitions.resolve(alert_id=alert.pk, now=now, summary=summary)
        if moved:
            _notify(alert=alert, rule=alert.rule, event=NotificationEvent.RESOLVED, now=now)
    if moved:
        logger.warning("alert RESOLVED: %s [%s] %s", alert.rule.name, alert.subject, summary)
    return moved


def _notify(*, alert: Alert, rule: AlertRule, event: str, now: datetime) -> None:
    Notification.objects.bulk_create(
        Notification(
            alert=alert,
            event=event,
            channel_type=channel_type,
            target=target,
            next_attempt_at=now,
            created_at=now,
        )
        for channel_type, target in rule.channel_targets()
    )


def alerts_prune(*, before: datetime, limit: int) -> int:
    """Forget resolved alerts (and their notifications) resolved before `before`. Returns how many."""
    ids = list(
        Alert.objects.filter(state=AlertState.RESOLVED, resolved_at__lt=before).values_list("pk", flat=True)[:limit]
    )
    if not ids:
        return 0
    Alert.objects.filter(pk__in=ids).delete()
    return len(ids)
