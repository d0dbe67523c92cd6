"""The event history's partitions by day, made AHEAD_DAYS ahead (executions/history_partitions.py):
every event is written into its day's partition, none waits in DEFAULT for one
(store/postgres/partitions.py). A pass finds them all there but on the first pass of a day, when
it makes one; sweepers take turns, and a second one finds nothing to make. Retention drops them.
Nothing to do on the embedded default, which has no partitions."""

from dataclasses import dataclass
from datetime import datetime
from typing import Self

from background.service import Counts, Needs
from executions.history_partitions import history_partitions_ahead

# Days made ahead of today: a sweeper down for this long still finds its events' days there.
AHEAD_DAYS = 3


@dataclass
class Made(Counts):
    bookkeeping = True
    partitions_made: int = 0


class HistoryPartitions:
    name = "history_partitions"

    def __init__(self, *, ahead_days: int = AHEAD_DAYS) -> None:
        self.ahead_days = ahead_days

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls()

    def run_once(self, *, now: datetime) -> Made:
        return Made(partitions_made=history_partitions_ahead(now=now, days=self.ahead_days))
