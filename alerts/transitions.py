"""The named transitions of alerts and notifications (alerts/states.py): each a conditional
UPDATE from the states it declares, whose zero rows is an answer (another alerter moved it first).
alerts/services.py and alerts/delivery.py ask for them; nothing else writes their state."""

from datetime import datetime
from typing import Any

from alerts.models import Alert, Notification
from alerts.states import ALERT, NOTIFICATION, AlertState, NotificationState


@ALERT.transition([AlertState.FIRING], AlertState.RESOLVED)
def resolve(*, alert_id: Any, now: datetime, summary: str) -> bool:
    """FIRING → RESOLVED, saying why in `summary`."""
    return bool(
        Alert.objects.filter(pk=alert_id, state__in=ALERT.sources("resolve")).update(
            state=ALERT.target("resolve"), resolved_at=now, resolved_summary=summary
        )
    )


@NOTIFICATION.transition([NotificationState.PENDING], NotificationState.SENT)
def sent(*, notification_id: Any, attempts: int, at: datetime) -> bool:
    """PENDING → SENT: the channel took it at its `attempts`th attempt."""
    return bool(
        Notification.objects.filter(pk=notification_id, state__in=NOTIFICATION.sources("sent")).update(
            state=NOTIFICATION.target("sent"), attempts=attempts, sent_at=at, last_error=""
        )
    )


@NOTIFICATION.transition([NotificationState.PENDING], NotificationState.FAILED)
def failed(*, notification_id: Any, attempts: int, error: str) -> bool:
    """PENDING → FAILED: its last allowed attempt failed with `error`."""
    return bool(
        Notification.objects.filter(pk=notification_id, state__in=NOTIFICATION.sources("failed")).update(
            state=NOTIFICATION.target("failed"), attempts=attempts, last_error=error
        )
    )
