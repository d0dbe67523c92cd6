"""The claim's side of the named rate limits (pools/rate_limits.py).

Of the executions a claim chose, in its order (priority, then fair between tenants:
scheduling/admission.py), each held to a limit is counted against the limit's claim clock: one
that conforms is admitted; one over the limit is not, and is given its turn instead (the moment
it will conform, counted now), waiting PENDING until then with `pendingReason` RATE_LIMITED. At
its turn it is due again and admitted without being counted again. So turns are handed out in
the claim's fair order, and a backlog over a limit leaves the pool's walk at once rather than
standing at its head: the claim walks the pool again for the work behind it (`WALKS`). Before
its walk, a claim admits what holds a turn that has come (`turns_due`).

The claim paces admission; the worker's start is the exact guard (worker/rate_gate.py), so that
a broker or a worker that delivers late never bunches starts past the limit.
"""

import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from executions.models import Run
from pools import rate_limits
from pools.rate_limits import Limit
from store import DueRow, store

# How many times a claim walks a pool again after its walk gave turns instead of admitting.
WALKS = 8


class Limiter:
    """One claim's rate limits: read at its first use, under the lock across pools; turns given as the
    claim goes (so that its next walk of the pool is past them); clocks saved at its end."""

    def __init__(self, *, now: datetime) -> None:
        self.now = now
        self._limits: dict[str, Limit] | None = None
        self._tats: dict[str, float] = {}
        self._counted: set[str] = set()
        self.turned = 0

    @staticmethod
    def defined() -> bool:
        """Whether any limit is defined, in the process's view: a claim then takes the turn across
        pools (scheduling/admission.py) before it reads a clock."""
        return bool(rate_limits.definitions.get())

    def admit(self, rows: Sequence[DueRow]) -> tuple[list[DueRow], int]:
        """Of `rows` (in the claim's order), those to admit now, and how many were given turns."""
        limits = self._read() if rows else {}
        if not limits:
            return list(rows), 0
        facts = {f.id: f for f in store().limit_facts([row[0] for row in rows])}
        names = _names(facts.values())
        at = self.now.timestamp()
        admitted: list[DueRow] = []
        turns: dict[uuid.UUID, datetime] = {}
        for row in rows:
            fact = facts.get(row[0])
            limit = limits.get(names.get(row[0], ""))
            if limit is None or fact is None or fact.turn_at is not None:
                admitted.append(row)  # not limited, or holding the turn it was given
                continue
            when, self._tats[limit.name] = rate_limits.reserve(limit, self._tats[limit.name], at)
            self._counted.add(limit.name)
            if when <= at:
                admitted.append(row)
            else:
                turns[row[0]] = datetime.fromtimestamp(when, tz=UTC)
        store().give_turns(turns)
        self.turned += len(turns)
        return admitted, len(turns)

    def turns_due(self, pool: str, *, room: int, tenant_load: Counter[int], caps: dict[int, int]) -> list[DueRow]:
        """The executions of `pool` whose turns have come, up to `room`, within their tenants'
        concurrency limits: admitted first, before the pool's walk. Turns are given ahead, to a
        backlog in due order: walked with it, they would wait behind what has no turn yet (the
        whole backlog over the limit) and start late, all at once."""
        if room <= 0 or not self._read():
            return []
        taken = []
        for row in store().turns_due(pool=pool, now=self.now, limit=room):
            if row[2] not in caps or tenant_load[row[2]] < caps[row[2]]:
                taken.append(row)
                tenant_load[row[2]] += 1
        return taken

    def save(self) -> None:
        """The clocks of the limits this claim counted against (in the claim's transaction)."""
        if self._counted:
            store().save_claim_clocks({name: self._tats[name] for name in self._counted})

    def _read(self) -> dict[str, Limit]:
        if self._limits is None:
            # The process's view first: a claim where no limit is defined reads nothing more.
            if not rate_limits.definitions.get():
                self._limits = {}
            else:
                defined = store().claim_rate_limits()
                self._limits = {name: limit for name, (limit, _) in defined.items()}
                self._tats = {name: tat for name, (_, tat) in defined.items()}
        return self._limits


def limit_names(execution_ids: Sequence[Any]) -> dict[uuid.UUID, str]:
    """The limit each of `execution_ids` is held to ("" for none), by id."""
    return _names(store().limit_facts(execution_ids)) if execution_ids else {}


def _names(facts: Any) -> dict[uuid.UUID, str]:
    """Each execution's limit name ("" for none): its target's, else its handler's; a workflow
    step's from its run's steps, as the run keeps them."""
    facts = list(facts)
    runs = {f.run_id for f in facts if f.run_id is not None}
    steps = {}
    if runs:
        for run_id, kept in Run.objects.filter(pk__in=runs).values_list("id", "steps"):
            for step in kept:
                steps[(run_id, step["name"])] = step["target"]
    names = {}
    for f in facts:
        if f.run_id is None:
            names[f.id] = rate_limits.name_of(f.rate_limit, f.handler)
        else:
            names[f.id] = rate_limits.name_of_step(steps.get((f.run_id, f.step)) or {})
    return names
