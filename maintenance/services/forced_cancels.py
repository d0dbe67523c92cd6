"""Force-cancel: RUNNING with a cancel request that its worker did not carry out within two
graces (it reads the request at its next heartbeat), or whose worker is gone → CANCELLED."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Self

from django.conf import settings
from django.db import transaction

from background.service import Counts, Needs
from executions import transitions
from maintenance.services import BATCH
from telemetry import tracing


@dataclass
class ForceCancelled(Counts):
    force_cancelled: int = 0


class ForcedCancels:
    name = "forced_cancels"

    def __init__(self, *, cancel_grace: timedelta, batch: int = BATCH) -> None:
        self.cancel_grace, self.batch = cancel_grace, batch

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls(cancel_grace=timedelta(seconds=settings.TICKWORK_CANCEL_GRACE_SECONDS))

    def run_once(self, *, now: datetime) -> ForceCancelled:
        with transaction.atomic():
            moved = transitions.force_cancel_many(
                now=now, requested_before=now - 2 * self.cancel_grace, limit=self.batch
            )
            tracing.swept(moved, action="force_cancelled", error=False)
        return ForceCancelled(force_cancelled=len(moved))
