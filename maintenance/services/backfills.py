"""Backfills: release each RUNNING backfill's next fires as runs (origin BACKFILL) while fewer
than its `maxConcurrent` are unfinished, and finish those with nothing left
(scheduling.backfills.backfill_release). Its pace is the sweeper's pass: a backfill moves on
within TICKWORK_SWEEP_SECONDS of a run ending (docs/backfill.md says why here, not in the claim)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Self

from background.service import Counts, Needs
from maintenance.services import BATCH
from scheduling.backfills import backfill_release


@dataclass
class Backfilled(Counts):
    released: int = 0
    finished: int = 0


class Backfills:
    name = "backfills"

    def __init__(self, *, batch: int = BATCH) -> None:
        self.batch = batch

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls()

    def run_once(self, *, now: datetime) -> Backfilled:
        released, finished = backfill_release(now=now, limit=self.batch)
        return Backfilled(released=released, finished=finished)
