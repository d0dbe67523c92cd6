"""Rescue lost leases: RUNNING whose lease expired without a heartbeat (its worker crashed, froze
or lost the database) → FAILED_WORKER_LOST, and the retry policy takes it from there (PENDING
after the backoff, or DEAD). SKIP LOCKED on PostgreSQL, so any number of sweepers can run."""

from dataclasses import dataclass
from datetime import datetime
from typing import Self

from django.db import transaction

from background.service import Counts, Needs
from executions import transitions
from executions.states import ExecutionState
from maintenance.services import BATCH
from scheduling.failures import execution_settle_failure
from telemetry import tracing


@dataclass
class Rescued(Counts):
    lost: int = 0


class LostLeases:
    name = "lost_leases"

    def __init__(self, *, batch: int = BATCH) -> None:
        self.batch = batch

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls()

    def run_once(self, *, now: datetime) -> Rescued:
        with transaction.atomic():
            moved = transitions.rescue_many(now=now, limit=self.batch)
            for m in moved:
                execution_settle_failure(execution_id=m.id, failed_state=ExecutionState.FAILED_WORKER_LOST, now=now)
            tracing.swept(moved, action="worker_lost", error=True)
        return Rescued(lost=len(moved))
