"""Start lag as the dashboard charts it: from when the work could first run to when it started.

It could first run at the later of its due time (`available_at`: the fire's `scheduledFor`, or a
retry's backoff) and its own creation. So a one-off job created with a `runAt` in the past is
measured from its creation, not from that past moment (it could not have run before it existed),
and a retry from its backoff, not from the first attempt's fire. For a cron fire, materialised
when the fire before it was claimed, this is its `scheduledFor`.

The metrics' histograms (executions/tallies.py) and the START_LAG_P99 alert measure from
`available_at` alone: they differ only for work created already due (a past `runAt`, a trigger)."""

from datetime import datetime

from django.db.models import F
from django.db.models.functions import Greatest


def could_run_from() -> Greatest:
    """The ORM's spelling of when an execution could first run."""
    return Greatest(F("available_at"), F("created_at"))


def start_lag_seconds(*, started_at: datetime, available_at: datetime, created_at: datetime) -> float:
    """Never below 0: clocks of different hosts, and a start recorded in the same instant."""
    return max((started_at - max(available_at, created_at)).total_seconds(), 0.0)
