"""The event history's partitions by day, as the sweeper sees them: made ahead of the days they
hold (maintenance/services/history_partitions.py), and dropped whole once their day is past the
retention (maintenance/services/retention.py) instead of their rows deleted one by one with their
executions (executions.models.history_cascade). PostgreSQL only: store/postgres/partitions.py says
how, and what becomes of an event no partition takes or of one whose execution is kept. The
embedded default keeps a plain table: both are no-ops there."""

from datetime import datetime

from store import store


def history_partitions_ahead(*, now: datetime, days: int) -> int:
    """Make the missing partitions of `now`'s day and the `days` after it; how many it made."""
    return store().history_partitions_ahead(now=now, days=days)


def history_partitions_drop(*, before: datetime, limit: int) -> tuple[int, int, int]:
    """Drop the partitions wholly before `before`, keeping the events of executions that still
    exist; and delete up to `limit` such kept events whose execution is gone since. Returns
    (partitions dropped, events kept, kept events deleted). Call after the executions finished
    before `before` are pruned: an event of one that is not yet is kept, and deleted later."""
    return store().history_partitions_drop(before=before, limit=limit)
