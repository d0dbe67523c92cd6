"""The rate limits' statements (pools/rate_limits.py says what a limit is), alike on both stores:
the ORM writes them as well as hand-written SQL would, a row or a claim's batch at a time."""

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Case, F, Value, When
from django.db.models.functions import Greatest

from pools.models import RateLimit
from pools.rate_limits import Limit
from store import tables
from store.rows import DueRow, due_row
from store.tables import PENDING

# The job types whose fires make their successors (store/queries.py's RECURS).
RECURRING = ["CRON", "INTERVAL"]


class LimitFacts(NamedTuple):
    """What says which limit an execution is held to, and whether it holds a turn."""

    id: uuid.UUID
    rate_limit: str | None  # its job's target's
    handler: str  # its job's
    run_id: uuid.UUID | None  # a workflow step's run (its step's target names its own)
    step: str
    turn_at: datetime | None  # the turn it holds, if it was over its limit when chosen


class RateLimitOperations:
    def claim_rate_limits(self) -> dict[str, tuple[Limit, float]]:
        """The limits defined, each with the claim's clock (its tat: pools/rate_limits.py).
        Read under the lock across pools, so that claims take turns with the clock too."""
        return {
            name: (Limit(name, per_second, burst), tat)
            for name, per_second, burst, tat in RateLimit.objects.values_list(
                "name", "per_second", "burst", "admit_tat"
            )
        }

    def limit_facts(self, execution_ids: Sequence[Any]) -> list[LimitFacts]:
        """Of the executions `execution_ids`: what says their limits."""
        rows = (
            tables.execution()
            ._default_manager.filter(pk__in=list(execution_ids))
            .values_list("id", "job__rate_limit", "job__handler", "run_id", "step", "rate_turn_at")
        )
        return [LimitFacts(*row) for row in rows]

    def turns_due(self, *, pool: str, now: datetime, limit: int) -> list[DueRow]:
        """Up to `limit` executions of active jobs in `pool` whose rate-limit turn has come, the
        earliest turn first (the partial index execution_turn: only rows holding turns)."""
        if limit <= 0:
            return []
        rows = (
            tables.execution()
            ._default_manager.filter(
                state=PENDING, pool=pool, rate_turn_at__isnull=False, rate_turn_at__lte=now, job__state="ACTIVE"
            )
            .annotate(cron=Case(When(job__type__in=RECURRING, then=Value(True)), default=Value(False)))
            .order_by("rate_turn_at")
            .values_list("id", "cron", "tenant_id", "priority")[:limit]
        )
        return [due_row(row) for row in rows]

    def give_turns(self, turns: Mapping[Any, datetime]) -> int:
        """The PENDING executions of `turns` wait for their turns: due then, holding them."""
        if not turns:
            return 0
        when = Case(*(When(pk=pk, then=Value(at)) for pk, at in turns.items()))
        return (
            tables.execution()
            ._default_manager.filter(pk__in=list(turns), state=PENDING)
            .update(available_at=when, rate_turn_at=when)
        )

    def save_claim_clocks(self, tats: Mapping[str, float]) -> None:
        """The claim's clocks of the limits it counted starts against."""
        for name, tat in tats.items():
            RateLimit.objects.filter(name=name).update(admit_tat=tat)

    def take_start(self, name: str, at: float) -> float | None:
        """Count a start at `at` (seconds since the epoch) against the limit `name`, if it conforms
        now: None when it was counted (or the limit is gone), else when it will conform. One
        conditional UPDATE: concurrent starts of one limit take turns on its row."""
        limits = RateLimit.objects.filter(name=name)
        counted = limits.filter(start_tat__lte=Value(at) + (F("burst") - 1) / F("per_second")).update(
            start_tat=Greatest(F("start_tat"), Value(at)) + 1.0 / F("per_second")
        )
        if counted:
            return None
        row = limits.values_list("per_second", "burst", "start_tat").first()
        if row is None:
            return None  # deleted meanwhile: no limit holds it any more
        per_second, burst, tat = row
        return max(at, tat - (burst - 1) / per_second)
