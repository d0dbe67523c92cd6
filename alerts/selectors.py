"""Reads of rules and alerts, scoped as every selector is (tenants.selectors.scope_of): a tenant
sees its own; staff (scope None) see every tenant's and the global ones."""

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from alerts.models import Alert, AlertRule
from alerts.states import AlertState


def rule_list(*, scope: list[int] | None) -> QuerySet[AlertRule]:
    rules = AlertRule.objects.select_related("tenant", "job")
    return rules if scope is None else rules.filter(tenant_id__in=scope)


def rule_get(*, scope: list[int] | None, rule_id: Any) -> AlertRule | None:
    try:
        return rule_list(scope=scope).filter(pk=rule_id).first()
    except ValidationError:  # a malformed id is simply not found
        return None


def alert_list(*, scope: list[int] | None) -> QuerySet[Alert]:
    alerts = Alert.objects.select_related("rule", "rule__tenant").prefetch_related("notifications")
    return alerts if scope is None else alerts.filter(tenant_id__in=scope)


def alert_get(*, scope: list[int] | None, alert_id: Any) -> Alert | None:
    try:
        return alert_list(scope=scope).filter(pk=alert_id).first()
    except ValidationError:
        return None


def firing(*, scope: list[int] | None, limit: int) -> list[Alert]:
    """Up to `limit` FIRING alerts, newest first, for the dashboard's banner: one query."""
    alerts = Alert.objects.filter(state=AlertState.FIRING).select_related("rule").order_by("-fired_at")
    if scope is not None:
        alerts = alerts.filter(tenant_id__in=scope)
    return list(alerts[:limit])


def any_rule_enabled() -> bool:
    """Whether some rule is on, so that an alerter ought to be running (health says so)."""
    return AlertRule.objects.filter(enabled=True).exists()
