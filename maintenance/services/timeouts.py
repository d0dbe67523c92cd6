"""Time out: RUNNING past its timeout plus the grace its worker had to stop it itself (the worker
times a run out at its heartbeat; this is the backstop) → TIMED_OUT, and the retry policy."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Self

from django.conf import settings
from django.db import transaction

from background.service import Counts, Needs
from executions import transitions
from executions.states import ExecutionState
from maintenance.services import BATCH
from scheduling.failures import execution_settle_failure
from telemetry import tracing


@dataclass
class TimedOut(Counts):
    timed_out: int = 0


class Timeouts:
    name = "timeouts"

    def __init__(self, *, cancel_grace: timedelta, batch: int = BATCH) -> None:
        self.cancel_grace, self.batch = cancel_grace, batch

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls(cancel_grace=timedelta(seconds=settings.TICKWORK_CANCEL_GRACE_SECONDS))

    def run_once(self, *, now: datetime) -> TimedOut:
        with transaction.atomic():
            moved = transitions.time_out_many(now=now, before=now - self.cancel_grace, limit=self.batch)
            for m in moved:
                execution_settle_failure(execution_id=m.id, failed_state=ExecutionState.TIMED_OUT, now=now)
            tracing.swept(moved, action="timed_out", error=True)
        return TimedOut(timed_out=len(moved))
