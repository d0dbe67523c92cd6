"""Alert delivery: send the notifications due (alerts.delivery.deliver_due): claimed, sent outside
any transaction (signed webhooks through outbound/, emails), marked SENT or retried with a growing
pause until they fail for good. At least once; never two alerters sending the same row at once."""

from dataclasses import dataclass
from datetime import datetime
from typing import Self

from alerts.delivery import deliver_due
from background.service import Counts, Needs
from executions.clock import db_now


@dataclass
class Delivered(Counts):
    sent: int = 0
    retried: int = 0
    failed: int = 0  # for good: no attempt left


class AlertDelivery:
    name = "alert_delivery"

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls()

    def run_once(self, *, now: datetime) -> Delivered:
        # Each outcome is recorded at the database's time: a send can take long past `now`.
        result = deliver_due(now=now, clock=db_now)
        return Delivered(sent=result.sent, retried=result.retried, failed=result.failed)
