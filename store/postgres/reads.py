"""The dashboard's reads on PostgreSQL: the planner's estimate from EXPLAIN, percentiles in one
GROUPING SETS pass, a statement timeout as a read's budget, and a UNION ALL of short ordered index
walks."""

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import ClassVar

from django.core.exceptions import EmptyResultSet
from django.db import OperationalError, connections, transaction
from django.db.models import F, FloatField, Func, Q, QuerySet
from django.db.models.expressions import Combinable

from store.interface import OverBudget
from store.postgres import queries
from store.replica.routing import read_alias
from store.rows import Overall, PerMinute


class PostgresReads:
    bounds_statements: ClassVar[bool] = True
    proves_partial_indexes: ClassVar[bool] = True

    def first_of_parts(self, queryset: QuerySet, *, parts: Sequence[Q], order: Sequence[str], limit: int) -> list:
        # A UNION ALL of each part's first rows, each its own index walk, then the merge's sort
        # of at most len(parts) * limit rows.
        ordered = queryset.order_by(*order)
        pieces = [ordered.filter(part)[:limit] for part in parts]
        if len(pieces) < 2:
            return list(pieces[0] if pieces else ordered.none())
        return list(pieces[0].union(*pieces[1:], all=True).order_by(*order)[:limit])

    def estimate_rows(self, queryset: QuerySet) -> int | None:
        try:
            plan = json.loads(queryset.explain(format="json"))
            return int(plan[0]["Plan"]["Plan Rows"])
        except Exception:  # an estimate is a nicety; the caller's capped count still stands
            return None

    def start_lags(self, started: QuerySet, *, could_run_from: Combinable) -> tuple[PerMinute, Overall]:
        # GROUPING SETS (which the ORM cannot spell) around the ORM's own, scoped, query of the
        # rows. Minutes are truncated in the session's time zone, which Django sets to UTC.
        # date_part, not EXTRACT: since PostgreSQL 14 EXTRACT gives numeric, slower over an hour's
        # starts (bench/README.md); the percentile wants a double anyway.
        lag = Func(
            F("started_at") - could_run_from,
            template="date_part('epoch', %(expressions)s)",
            output_field=FloatField(),
        )
        try:
            inner, params = started.annotate(lag=lag).values("started_at", "lag").query.sql_with_params()
        except EmptyResultSet:  # a scope of no tenants
            return {}, (0, None, None)
        per_minute: PerMinute = {}
        overall: Overall = (0, None, None)
        with connections[read_alias()].cursor() as cursor:
            cursor.execute(queries.START_LAGS.format(rows=inner), params)
            for minute, count, p50, p99 in cursor.fetchall():
                if minute is None:
                    overall = (count, p50, p99)
                else:
                    per_minute[minute] = (p50, p99)
        return per_minute, overall

    @contextlib.contextmanager
    def statement_budget(self, milliseconds: int) -> Iterator[None]:
        # On the database the budgeted reads go to: the replica's, when the request may read it.
        alias = read_alias()
        try:
            with transaction.atomic(using=alias):
                with connections[alias].cursor() as cursor:
                    cursor.execute(queries.STATEMENT_TIMEOUT.format(milliseconds=int(milliseconds)))
                yield
                # Inside an outer transaction (a test's, ATOMIC_REQUESTS) this block is a savepoint,
                # and SET LOCAL would outlive it: every later read of the request would be budgeted.
                with connections[alias].cursor() as cursor:
                    cursor.execute(queries.STATEMENT_TIMEOUT_DEFAULT)
        except OperationalError as exc:  # QueryCanceled: over budget
            raise OverBudget from exc

    def newest_first(
        self,
        walks: list[QuerySet],
        everything: QuerySet,
        start: int,
        stop: int,
        order: tuple[str, ...] = ("-scheduled_for", "-id"),
    ) -> list[tuple]:
        # Each walk stops after `stop` rows of its index; the union of those is sorted.
        if len(walks) == 1:
            return list(walks[0][start:stop])
        merged = walks[0][:stop].union(*(walk[:stop] for walk in walks[1:]), all=True)
        return list(merged.order_by(*order)[start:stop])
