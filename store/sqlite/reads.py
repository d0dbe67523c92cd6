"""The dashboard's reads on the embedded default (SQLite): a small install's history is small, so
what PostgreSQL does in SQL is done here in Python or plainly."""

import contextlib
import functools
import operator
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import ClassVar

from django.db.models import Q, QuerySet
from django.db.models.expressions import Combinable

from store.functions import percentile
from store.rows import Overall, PerMinute


class SqliteReads:
    # A statement's time budget cannot stop a read here: a caller does not ask for one.
    bounds_statements: ClassVar[bool] = False
    # Only a query that repeats a partial index's condition, term for term, reads it.
    proves_partial_indexes: ClassVar[bool] = False

    def first_of_parts(self, queryset: QuerySet, *, parts: Sequence[Q], order: Sequence[str], limit: int) -> list:
        # SQLite cannot limit the parts of a UNION; the embedded default's tables are small.
        return list(queryset.filter(functools.reduce(operator.or_, parts, Q(pk__in=[]))).order_by(*order)[:limit])

    def estimate_rows(self, queryset: QuerySet) -> int | None:
        return None

    def start_lags(self, started: QuerySet, *, could_run_from: Combinable) -> tuple[PerMinute, Overall]:
        by_minute: dict[datetime, list[float]] = {}
        every: list[float] = []
        for started_at, could in started.annotate(could_run_from=could_run_from).values_list(
            "started_at", "could_run_from"
        ):
            # Never below 0 (readmodels.start_lag.start_lag_seconds): clocks of different hosts,
            # and a start recorded in the same instant.
            lag = max((started_at - could).total_seconds(), 0.0)
            by_minute.setdefault(started_at.replace(second=0, microsecond=0), []).append(lag)
            every.append(lag)
        per_minute = {at: (percentile(lags, 0.5), percentile(lags, 0.99)) for at, lags in by_minute.items()}
        return per_minute, (len(every), percentile(every, 0.5), percentile(every, 0.99))

    @contextlib.contextmanager
    def statement_budget(self, milliseconds: int) -> Iterator[None]:
        yield

    def newest_first(
        self,
        walks: list[QuerySet],
        everything: QuerySet,
        start: int,
        stop: int,
        order: tuple[str, ...] = ("-scheduled_for", "-id"),
    ) -> list[tuple]:
        # SQLite cannot slice the parts of a UNION, so it walks `everything` (the walks' rows as
        # one queryset) in that order instead.
        if len(walks) == 1:
            return list(walks[0][start:stop])
        return list(everything.order_by(*order)[start:stop])
