"""Retention: everything Tickwork forgets, in one place and one order. Each package prunes its own
rows (its prune operation keeps what its rows counted, or skips rows another sweeper holds); this
service says when and in which order, each bounded by the batch (the minute samples by their
keep):

1. finished executions past TICKWORK_RETENTION_DAYS, with their events and logged lines, their
   counts folded into the metrics' totals (executions.transitions.prune_many);
2. the runs whose executions are all gone (scheduling.pruning.runs_prune), then
3. the ended jobs no execution or run refers to any more (scheduling.pruning.jobs_prune): after
   1 and 2, which free them, in one transaction with them: a one-off is found by its executions
   as they go (its COMPLETED is read, not written), so none is left behind by a crash between;
   On PostgreSQL the executions' events stay behind (executions.models.history_cascade): once
   the executions are pruned up to the cutoff (a batch short of full), the history's partitions
   wholly before it are dropped whole, each in a transaction of its own, the few events of
   executions still kept written again (executions/history_partitions.py);
4. workers and roles not seen for a day, stopped or gone: the operator has seen them
   (pools.registry.prune, pools.roles.prune);
5. events past the retention, never sooner than their idempotency keys last (events_prune);
6. the pools' minute samples past their eight days (pool_history.prune);
7. alerts resolved before the retention, with their notifications (alerts_prune).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Self

from django.conf import settings
from django.db import transaction

from alerts.services import alerts_prune
from background.service import Counts, Needs
from events.services import events_prune
from executions import transitions
from executions.history_partitions import history_partitions_drop
from maintenance.services import BATCH, pool_history
from pools import registry, roles
from scheduling.pruning import jobs_prune, runs_prune

# A worker not seen for this long (stopped, or gone) leaves the registry: the operator has seen it.
WORKER_RETENTION = timedelta(days=1)


@dataclass
class Pruned(Counts):
    pruned: int = 0  # executions
    runs_pruned: int = 0
    jobs_pruned: int = 0
    partitions_dropped: int = 0  # of the history, by day (PostgreSQL)
    history_kept: int = 0  # events of kept executions written again as their partition went
    history_pruned: int = 0  # such kept events deleted once their execution went
    workers_forgotten: int = 0
    events_pruned: int = 0
    samples_pruned: int = 0
    alerts_pruned: int = 0


class Retention:
    name = "retention"

    def __init__(self, *, retention: timedelta, batch: int = BATCH) -> None:
        self.retention, self.batch = retention, batch

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls(retention=timedelta(days=settings.TICKWORK_RETENTION_DAYS))

    def run_once(self, *, now: datetime) -> Pruned:
        before, limit = now - self.retention, self.batch
        with transaction.atomic():
            executions, their_jobs = transitions.prune_many(before=before, limit=limit)
            runs = runs_prune(before=before, limit=limit)
            jobs = jobs_prune(before=before, limit=limit, pruned_jobs=their_jobs)
        # Not while executions past the cutoff wait for the next batch: their events would be
        # kept (written again) only to be deleted one by one later.
        dropped, kept, deleted = (
            (0, 0, 0) if executions >= limit else history_partitions_drop(before=before, limit=limit)
        )
        return Pruned(
            pruned=executions,
            runs_pruned=runs,
            jobs_pruned=jobs,
            partitions_dropped=dropped,
            history_kept=kept,
            history_pruned=deleted,
            workers_forgotten=registry.prune(now=now, older_than=WORKER_RETENTION)
            + roles.prune(now=now, older_than=WORKER_RETENTION),
            events_pruned=events_prune(now=now, retention=self.retention, limit=limit),
            samples_pruned=pool_history.prune(now=now),
            alerts_pruned=alerts_prune(before=before, limit=limit),
        )
