"""Named rate limits: at most `per_second` starts a second, `burst` of them at once, of the
executions that name one, across every dispatcher and worker (README, "Rate limits";
docs/rate-limits.md).

A limit is a token bucket kept as GCRA (the generic cell rate algorithm) keeps one: a single
number, the theoretical arrival time `tat`, instead of a token count and a refill time. With
T = 1 / per_second and a tolerance of (burst - 1) T, a start at `t` conforms when t >= tat - tolerance,
and then tat becomes max(tat, t) + T. One number means one conditional UPDATE decides a start,
with nothing to refill in between; over any span of L seconds it lets at most burst + L * per_second
through, as a bucket of `burst` tokens refilled at `per_second` would.

Who keeps which clock (pools.models.RateLimit): the claim paces admission and gives each
execution over the limit its turn (`reserve`: the moment it will conform), in the claim's fair
order (scheduling/rate_limiting.py); the worker's start is the exact guard, so that brokers and
workers delivering late never bunch starts past the limit (worker/rate_gate.py).
"""

import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs import registry
from pools.models import RateLimit

# How long a process trusts what it read of the limits' definitions (the workers' starts): a
# limit set or changed reaches every worker's start within this long (the claim reads them anew).
DEFINITIONS_TTL_SECONDS = 5.0
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}"


@dataclass(frozen=True)
class Limit:
    name: str
    per_second: float
    burst: int

    @property
    def interval(self) -> float:
        return 1.0 / self.per_second

    @property
    def tolerance(self) -> float:
        return (self.burst - 1) * self.interval

    def describe(self) -> str:
        return f"{self.name} ({self.per_second:g}/s, burst {self.burst})"


def reserve(limit: Limit, tat: float, at: float) -> tuple[float, float]:
    """A start asked for at `at`: the moment it conforms (`at` itself when it does now) and the
    bucket's tat once that start is counted."""
    when = max(at, tat - limit.tolerance)
    return when, max(tat, when) + limit.interval


def name_of_step(target: Mapping[str, Any]) -> str:
    """A workflow step's limit, from its target as its run keeps it (jobs/workflow.py)."""
    return name_of(target.get("rate_limit"), target.get("handler", ""))


def name_of(rate_limit: str | None, handler: str) -> str:
    """The limit an execution is held to: its target's `rateLimit`, else its handler's
    registration's (jobs/registry.py); "" for none."""
    if rate_limit:
        return rate_limit
    spec = registry.get(handler)
    return spec.rate_limit if spec is not None else ""


MAX_PER_SECOND = 1_000_000.0
MAX_BURST = 1_000_000


def problems(*, name: str, per_second: float, burst: int) -> dict[str, str]:
    """What is wrong with a limit's definition, by field ({} when nothing is): the command's and
    the admin's one check."""
    found = {}
    if not re.fullmatch(_NAME, name):
        found["name"] = "is not a limit's name: letters, digits and . _ - (up to 64)"
    if not (0 < per_second <= MAX_PER_SECOND) or math.isnan(per_second):
        found["per_second"] = f"must be above 0 and at most {MAX_PER_SECOND:g}"
    if not 1 <= burst <= MAX_BURST:
        found["burst"] = f"must be from 1 to {MAX_BURST}"
    return found


def define(*, name: str, per_second: float, burst: int = 1) -> tuple[RateLimit, bool]:
    """Define the limit `name`, or change its rate and burst (its clocks go on as they are: a
    change applies from the next start on). Returns it and whether it is new; ValueError naming
    what is wrong (`problems`)."""
    wrong = problems(name=name, per_second=per_second, burst=burst)
    if wrong:
        field, message = next(iter(wrong.items()))
        raise ValueError(f"'{name}' {message}" if field == "name" else f"--{field.replace('_', '-')} {message}")
    limit, created = RateLimit.objects.update_or_create(name=name, defaults={"per_second": per_second, "burst": burst})
    definitions.forget()
    return limit, created


def remove(*, name: str) -> bool:
    """Remove the limit `name`: what names it runs unlimited. False if there was none."""
    deleted, _ = RateLimit.objects.filter(name=name).delete()
    definitions.forget()
    return bool(deleted)


class _Definitions:
    """The limits as this process last read them, read again after DEFINITIONS_TTL_SECONDS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._limits: dict[str, Limit] = {}

    def get(self) -> dict[str, Limit]:
        with self._lock:
            if time.monotonic() - self._read_at > DEFINITIONS_TTL_SECONDS:
                self._limits = read()
                self._read_at = time.monotonic()
            return self._limits

    def forget(self) -> None:
        with self._lock:
            self._read_at = -float("inf")


def read() -> dict[str, Limit]:
    """The limits defined now, by name."""
    return {
        name: Limit(name, per_second, burst)
        for name, per_second, burst in RateLimit.objects.values_list("name", "per_second", "burst")
    }


definitions = _Definitions()
