"""The dashboard's database-specific reads, as the embedded default (SQLite) runs them: a small
install's history is small, so what PostgreSQL does in SQL is done here in Python or plainly.
`PostgresQueries` (dashboard/queries/postgres.py) overrides each with the shape that stays
cheap at millions of rows."""

import contextlib
from collections.abc import Iterator
from datetime import datetime

from django.db.models import QuerySet

from executions.tallies import percentile
from readmodels.start_lag import start_lag_seconds

# Start lags per minute of start: {minute: (p50, p99)}, and over all: (count, p50, p99); seconds.
PerMinute = dict[datetime, tuple[float | None, float | None]]
Overall = tuple[int, float | None, float | None]


class OverBudget(Exception):
    """A read stopped by its time budget."""


class Queries:
    # Whether `statement_budget` can stop a read that runs long; where it cannot, a caller
    # does not ask for one.
    bounds_statements = False

    def estimate_rows(self, queryset: QuerySet) -> int | None:
        """The planner's row estimate for a queryset, without reading the rows; None if the
        database gives none."""
        return None

    def start_lags(self, started: QuerySet) -> tuple[PerMinute, Overall]:
        """p50 and p99 of the start lag (from when the work could first run: readmodels/start_lag.py)
        of `started`, per minute of start and over all."""
        by_minute: dict[datetime, list[float]] = {}
        every: list[float] = []
        for started_at, available_at, created_at in started.values_list("started_at", "available_at", "created_at"):
            lag = start_lag_seconds(started_at=started_at, available_at=available_at, created_at=created_at)
            by_minute.setdefault(started_at.replace(second=0, microsecond=0), []).append(lag)
            every.append(lag)
        per_minute = {at: (percentile(lags, 0.5), percentile(lags, 0.99)) for at, lags in by_minute.items()}
        return per_minute, (len(every), percentile(every, 0.5), percentile(every, 0.99))

    @contextlib.contextmanager
    def statement_budget(self, milliseconds: int) -> Iterator[None]:
        """Run the reads inside within `milliseconds` each, raising OverBudget past it."""
        yield

    def newest_first(
        self,
        walks: list[QuerySet],
        everything: QuerySet,
        start: int,
        stop: int,
        order: tuple[str, ...] = ("-scheduled_for", "-id"),
    ) -> list[tuple]:
        """Rows start..stop of the merge of ordered walks (each ordered by `order`,
        as `everything`'s values are: the order's fields, newest first).
        SQLite cannot slice the parts of a UNION, so it walks `everything` (the walks' rows as
        one queryset) in that order instead."""
        if len(walks) == 1:
            return list(walks[0][start:stop])
        return list(everything.order_by(*order)[start:stop])
