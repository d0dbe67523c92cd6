"""Counters that outlive their rows: the metrics' counts of finished executions and retries and
their start-lag and run-duration histograms, read from the store when scraped, so that they are
true across every process and host and nothing resets when a worker process is replaced.

A counter is what the executions table holds now (`tally` of it) plus what left it, kept in
ExecutionTotal. Whatever makes a row leave the table, or lowers what it counts, folds the row's
tally into the totals in the same transaction (`folding`), so the counter stays where it was:
- the sweeper's pruning of finished executions (transitions.prune_many);
- a re-drive (transitions.redrive) and the re-opening of a run's cancelled steps (steps.reblock):
  a finished row becomes unfinished, and the end it had still counts;
- a discard from the dead letter (transitions.discard_dead_many): the DEAD end keeps counting as
  DEAD, never as a second, DISCARDED end;
- a job update that moves its pending runs to another pool (scheduling.job_changes.job_update): their earlier
  retries go with them, so the old pool's totals keep them and the new pool's give them back;
- deleting jobs, executions or tenants in the admin (web/admin.py), whose cascade takes executions.
Nothing else removes an execution that counts: runs_prune and jobs_prune delete only runs and jobs
with no execution left, and a job update drops only a run that has not begun (first attempts,
none finished). None of this is on the hot path: claim, start and finish write nothing here.

What is counted:
- finished: executions in a terminal state (SUCCEEDED, DEAD, CANCELLED, DISCARDED), by pool, tenant and that
  state. A re-driven execution that ends again counts again: the counter counts ends, not rows.
- retries: attempts beyond the first (`attempt - 1`), by pool. A re-drive's attempt is an
  operator's, not the retry policy's: its fold takes it off, so this counts automatic retries.
- start lag (started_at - available_at, as the dashboard measures it, never below 0) and run
  duration (finished_at - started_at) of each finished execution that started, by pool. A retried
  attempt's times are not kept on the row (its events have them), so the last attempt is observed.
"""

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Case, Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum, Value, When

from executions.models import Execution, ExecutionTotal
from executions.states import TERMINAL

# Upper bounds of the histograms' buckets, in seconds. Fixed: a bucket's count is a counter, and
# folded totals are kept by bound (a bound added later reads the nearest lower one's count).
LAG_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
DURATION_BUCKETS: tuple[float, ...] = (
    0.01,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)

Key = tuple[str, int, str]  # (pool, tenant id, state)


def bound_key(bound: float) -> str:
    return f"{bound:g}"


@dataclass
class Histogram:
    """Cumulative counts of observations at or below each bound, their count and their sum."""

    bounds: tuple[float, ...]
    buckets: list[int]
    count: int = 0
    total: float = 0.0

    @classmethod
    def empty(cls, bounds: tuple[float, ...]) -> "Histogram":
        return cls(bounds, [0] * len(bounds))

    @classmethod
    def from_json(cls, bounds: tuple[float, ...], stored: Mapping[str, int], count: int, total: float) -> "Histogram":
        """A folded histogram. A bound it was not kept by takes the count at the nearest lower
        bound it was kept by: never more than is true, and still cumulative."""
        kept = sorted((float(b), n) for b, n in stored.items())
        buckets = []
        for bound in bounds:
            below = [n for b, n in kept if b <= bound]
            buckets.append(below[-1] if below else 0)
        return cls(bounds, buckets, count, total)

    def to_json(self) -> dict[str, int]:
        return {bound_key(b): n for b, n in zip(self.bounds, self.buckets, strict=True)}

    def plus(self, other: "Histogram", sign: int = 1) -> "Histogram":
        assert self.bounds == other.bounds
        return Histogram(
            self.bounds,
            [a + sign * b for a, b in zip(self.buckets, other.buckets, strict=True)],
            self.count + sign * other.count,
            self.total + sign * other.total,
        )


@dataclass
class Tally:
    """What some executions count."""

    finished: int = 0
    retries: int = 0
    lag: Histogram = field(default_factory=lambda: Histogram.empty(LAG_BUCKETS))
    duration: Histogram = field(default_factory=lambda: Histogram.empty(DURATION_BUCKETS))

    def plus(self, other: "Tally", sign: int = 1) -> "Tally":
        return Tally(
            self.finished + sign * other.finished,
            self.retries + sign * other.retries,
            self.lag.plus(other.lag, sign),
            self.duration.plus(other.duration, sign),
        )

    def __bool__(self) -> bool:
        return bool(self.finished or self.retries or self.lag.count or self.duration.count)


# --- reading the store -------------------------------------------------------------------------------


def counts(executions: QuerySet[Execution]) -> dict[Key, tuple[int, int]]:
    """(rows, retries) of `executions` by (pool, tenant, state): one grouped scan."""
    rows = (
        executions.order_by()
        .values_list("pool", "tenant_id", "state")
        .annotate(n=Count("pk"), retries=Sum(F("attempt") - 1))
    )
    return {(pool, tenant_id, state): (n, retries or 0) for pool, tenant_id, state, n, retries in rows}


def histograms(executions: QuerySet[Execution], *, by: Sequence[str]) -> dict[tuple, tuple[Histogram, Histogram]]:
    """(start lag, run duration) of the finished executions among `executions` that started,
    grouped by the fields `by`. Portable SQL: one conditional count per bucket."""
    lag = ExpressionWrapper(F("started_at") - F("available_at"), output_field=DurationField())
    duration = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    zero = Value(timedelta(0), output_field=DurationField())
    aggregates: dict[str, Any] = {
        "n": Count("pk"),
        "lag_sum": Sum(Case(When(lag__gt=timedelta(0), then=F("lag")), default=zero, output_field=DurationField())),
        "duration_sum": Sum(
            Case(When(duration__gt=timedelta(0), then=F("duration")), default=zero, output_field=DurationField())
        ),
    }
    for i, bound in enumerate(LAG_BUCKETS):
        aggregates[f"lag_{i}"] = Count("pk", filter=Q(lag__lte=timedelta(seconds=bound)))
    for i, bound in enumerate(DURATION_BUCKETS):
        aggregates[f"duration_{i}"] = Count("pk", filter=Q(duration__lte=timedelta(seconds=bound)))
    rows = (
        executions.filter(state__in=TERMINAL, started_at__isnull=False, finished_at__isnull=False)
        .alias(lag=lag, duration=duration)
        .order_by()
        .values(*by)
        .annotate(**aggregates)
    )
    found = {}
    for row in rows:
        found[tuple(row[name] for name in by)] = (
            Histogram(
                LAG_BUCKETS,
                [row[f"lag_{i}"] for i in range(len(LAG_BUCKETS))],
                row["n"],
                _seconds(row["lag_sum"]),
            ),
            Histogram(
                DURATION_BUCKETS,
                [row[f"duration_{i}"] for i in range(len(DURATION_BUCKETS))],
                row["n"],
                _seconds(row["duration_sum"]),
            ),
        )
    return found


def _seconds(value: timedelta | None) -> float:
    return value.total_seconds() if value is not None else 0.0


def tally(executions: QuerySet[Execution]) -> dict[Key, Tally]:
    """What `executions` count, by (pool, tenant, state)."""
    found: dict[Key, Tally] = {}
    for key, (n, retries) in counts(executions).items():
        found[key] = Tally(finished=n if key[2] in TERMINAL else 0, retries=retries)
    for (pool, tenant_id, state), (lag, duration) in histograms(executions, by=("pool", "tenant_id", "state")).items():
        have = found.setdefault((pool, tenant_id, state), Tally())
        found[(pool, tenant_id, state)] = dataclasses.replace(have, lag=lag, duration=duration)
    return found


def folded() -> dict[Key, Tally]:
    """The totals folded so far, by (pool, tenant, state)."""
    return {
        (row.pool, row.tenant_id, row.state): Tally(
            row.finished,
            row.retries,
            Histogram.from_json(LAG_BUCKETS, row.lag_buckets, row.lag_count, row.lag_sum),
            Histogram.from_json(DURATION_BUCKETS, row.duration_buckets, row.duration_count, row.duration_sum),
        )
        for row in ExecutionTotal.objects.all()
    }


# --- folding -----------------------------------------------------------------------------------------


def difference(before: Mapping[Key, Tally], after: Mapping[Key, Tally]) -> dict[Key, Tally]:
    """before - after, key by key: what a change took from the table's tally."""
    keys = sorted(set(before) | set(after))
    found = {key: before.get(key, Tally()).plus(after.get(key, Tally()), -1) for key in keys}
    return {key: t for key, t in found.items() if t}


def fold(deltas: Mapping[Key, Tally]) -> None:
    """Add `deltas` to the totals. Call inside the transaction that changes the rows they come from.
    Keys are created and locked in one order, so two folds at once wait rather than deadlock."""
    keys = sorted(key for key, t in deltas.items() if t)
    if not keys:
        return
    with transaction.atomic():
        ExecutionTotal.objects.bulk_create(
            [ExecutionTotal(pool=pool, tenant_id=tenant_id, state=state) for pool, tenant_id, state in keys],
            ignore_conflicts=True,
        )
        rows = (
            ExecutionTotal.objects.select_for_update()
            .filter(pool__in={k[0] for k in keys}, tenant_id__in={k[1] for k in keys}, state__in={k[2] for k in keys})
            .order_by("pool", "tenant_id", "state")
        )
        for row in rows:
            delta = deltas.get((row.pool, row.tenant_id, row.state))
            if not delta:
                continue
            lag = Histogram.from_json(LAG_BUCKETS, row.lag_buckets, row.lag_count, row.lag_sum).plus(delta.lag)
            duration = Histogram.from_json(
                DURATION_BUCKETS, row.duration_buckets, row.duration_count, row.duration_sum
            ).plus(delta.duration)
            row.finished += delta.finished
            row.retries += delta.retries
            row.lag_buckets, row.lag_count, row.lag_sum = lag.to_json(), lag.count, lag.total
            row.duration_buckets, row.duration_count, row.duration_sum = (
                duration.to_json(),
                duration.count,
                duration.total,
            )
            row.save()


@contextmanager
def folding(executions: QuerySet[Execution]) -> Iterator[list]:
    """Keep the counters where they are across a change to `executions` made in the block (a
    delete, a re-drive, a move to another pool): locks them, tallies them before and after, and
    folds the difference, all in one transaction. Yields their ids."""
    with transaction.atomic():
        ids = list(executions.select_for_update().values_list("pk", flat=True))
        if not ids:
            yield ids
            return
        before = tally(Execution.objects.filter(pk__in=ids))
        yield ids
        fold(difference(before, tally(Execution.objects.filter(pk__in=ids))))
