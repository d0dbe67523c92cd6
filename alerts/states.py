"""The state machines of alerts and of their notifications; alerts/transitions.py writes them.

An alert:
FIRING        raised by the evaluation that first saw the breach (alerts/services.alert_fire).
RESOLVED      terminal: the first evaluation that no longer saw it (or its rule was disabled)
              resolved it; a new breach is a new alert.

A notification (one channel, one event of an alert):
PENDING       written with the alert's move, to be sent at next_attempt_at (or sent, by an
              alerter that stopped before saying so); a failed attempt keeps it PENDING, later.
SENT          terminal: the channel took it.
FAILED        terminal: every attempt failed; last_error says why.
"""

from django.db import models

from machines import Machine


class AlertState(models.TextChoices):
    FIRING = "FIRING"
    RESOLVED = "RESOLVED"


class NotificationState(models.TextChoices):
    PENDING = "PENDING"
    SENT = "SENT"
    FAILED = "FAILED"


ALERT: Machine[AlertState] = Machine(
    model="alerts.Alert",
    states=AlertState,
    moves={AlertState.FIRING: {AlertState.RESOLVED}, AlertState.RESOLVED: set()},
    initial={AlertState.FIRING},
    terminal={AlertState.RESOLVED},
    writers=["alerts.transitions"],
)

NOTIFICATION: Machine[NotificationState] = Machine(
    model="alerts.Notification",
    states=NotificationState,
    moves={
        NotificationState.PENDING: {NotificationState.SENT, NotificationState.FAILED},
        NotificationState.SENT: set(),
        NotificationState.FAILED: set(),
    },
    initial={NotificationState.PENDING},
    terminal={NotificationState.SENT, NotificationState.FAILED},
    writers=["alerts.transitions"],
)
