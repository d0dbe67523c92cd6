"""What a background service is, the shape River's maintenance services have: one file each
(maintenance/services/), started from one list (maintenance/registry.py), run by its role's loop
(`loop.serve_services`).

A service is a class with a `name`, built once per process from its settings and what its role
gives it (`Needs`), whose `run_once(*, now)` does one batch of its work, in transactions, and
returns its `Counts`. `now` is a parameter, so tests control time."""

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import ClassVar, Protocol, Self

from background.publisher import Publisher


@dataclass(frozen=True)
class Needs:
    """What a role hands every service it builds (most need nothing of it)."""

    publisher: Publisher


@dataclass
class Counts:
    """What one `run_once` did: a dataclass of whole numbers, one per kind of thing done."""

    # Bookkeeping (the pools' minute samples), not work to take back: counted and logged, never
    # a reason for the role to run again at once.
    bookkeeping: ClassVar[bool] = False

    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def __str__(self) -> str:
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name))


class Service(Protocol):
    name: str  # its module's name, and its counts' name in the role's log

    @classmethod
    def build(cls, needs: Needs) -> Self: ...

    def run_once(self, *, now: datetime) -> Counts: ...


@dataclass
class Pass:
    """One unit of work of a role: each of its services' counts, in the registry's order."""

    counts: dict[str, Counts]

    def __getitem__(self, name: str) -> Counts:
        return self.counts[name]

    def total(self) -> int:
        return sum(c.total() for c in self.counts.values())

    def work(self) -> int:
        """What was taken back, moved or pruned: the bookkeeping left out."""
        return sum(c.total() for c in self.counts.values() if not c.bookkeeping)

    def __str__(self) -> str:
        return " ".join(f"{name}({counts})" for name, counts in self.counts.items() if counts.total())


def run_pass(services: Sequence[Service], *, now: datetime) -> Pass:
    """Each service once, in order, at the same `now`."""
    return Pass({service.name: service.run_once(now=now) for service in services})
