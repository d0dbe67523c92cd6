"""Retention calls each package's prune operation once a pass, in the order its docstring gives:
the executions before the runs and jobs they free, each bounded by the batch."""

from datetime import UTC, datetime, timedelta

import pytest

from maintenance.services import retention
from maintenance.services.retention import Retention

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.django_db  # the executions and the jobs they free are pruned in one transaction
def test_each_package_prunes_in_the_documented_order_within_the_batch(monkeypatch):
    calls = []

    def prune(name):
        def call(**kwargs):
            calls.append((name, kwargs))
            return {"executions": (1, {"job"}), "history partitions": (1, 1, 1)}.get(name, 1)

        return call

    order = [
        (retention.transitions, "prune_many", "executions"),
        (retention, "runs_prune", "runs"),
        (retention, "jobs_prune", "jobs"),
        (retention, "history_partitions_drop", "history partitions"),
        (retention.registry, "prune", "workers"),
        (retention.roles, "prune", "roles"),
        (retention, "events_prune", "events"),
        (retention.pool_history, "prune", "pool samples"),
        (retention, "alerts_prune", "alerts"),
    ]
    for target, name, label in order:
        monkeypatch.setattr(target, name, prune(label))

    pruned = Retention(retention=timedelta(days=30), batch=7).run_once(now=NOW)

    assert [label for label, _ in calls] == [label for _, _, label in order]
    before = NOW - timedelta(days=30)
    assert calls[0][1] == {"before": before, "limit": 7} and calls[-1][1] == {"before": before, "limit": 7}
    assert calls[2][1] == {"before": before, "limit": 7, "pruned_jobs": {"job"}}  # the executions' jobs
    assert pruned.total() == 11 and pruned.workers_forgotten == 2 and pruned.partitions_dropped == 1
