"""Retry policy for failed executions, as pure functions.

Kept free of Django and the database so the scheduling arithmetic can be
tested exhaustively (hypothesis) and reused by the worker, the API
(to preview schedules) and admin tooling alike.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

__all__ = ["Backoff", "RetryPolicy", "backoff_delay_ms", "next_attempt_at"]


class Backoff(StrEnum):
    EXPONENTIAL = "EXPONENTIAL"
    FIXED = "FIXED"


@dataclass(frozen=True)
class RetryPolicy:
    # Total attempts *including* the first one, so 1 means "never retry".
    max_attempts: int = 3
    backoff: Backoff = Backoff.EXPONENTIAL
    initial_delay_ms: int = 1000
    max_delay_ms: int = 60_000
    # "Full jitter" (AWS architecture blog, "Exponential Backoff And
    # Jitter"): spreading retries uniformly over [0, delay] avoids many
    # executions that failed together (e.g. one downstream outage) all
    # retrying in lock-step and knocking the service over again.
    jitter: bool = True

    def __post_init__(self) -> None:
        # Policies arrive from JSON / DB columns as plain strings; coerce so
        # comparisons and serialisation behave the same either way, and so
        # an unknown value fails here rather than deep inside the worker.
        object.__setattr__(self, "backoff", Backoff(self.backoff))
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_delay_ms < 0:
            raise ValueError(f"initial_delay_ms must be >= 0, got {self.initial_delay_ms}")
        if self.max_delay_ms < 0:
            raise ValueError(f"max_delay_ms must be >= 0, got {self.max_delay_ms}")


# A private instance rather than the module-level functions of `random`, so
# code elsewhere calling random.seed() can't make our jitter predictable
# (and tests that need determinism pass their own rng instead).
_default_rng = random.Random()


def _capped_delay_ms(policy: RetryPolicy, attempt: int) -> int:
    if policy.backoff is Backoff.FIXED:
        return min(policy.initial_delay_ms, policy.max_delay_ms)
    if policy.initial_delay_ms == 0:
        return 0
    # Python ints don't overflow, but 2 ** (10**9) would still burn CPU and
    # memory. Once the shift reaches max_delay_ms.bit_length(), the product
    # is >= 2**bit_length > max_delay_ms (initial >= 1), so the cap applies
    # regardless of how much larger the exponent is: clamp it there.
    shift = min(attempt - 1, policy.max_delay_ms.bit_length())
    return min(policy.initial_delay_ms << shift, policy.max_delay_ms)


def backoff_delay_ms(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> int:
    """Delay in ms before retrying after the 1-based ``attempt`` failed.

    FIXED: ``initial_delay_ms``; EXPONENTIAL: ``initial_delay_ms * 2**(attempt-1)``;
    both capped at ``max_delay_ms``. With jitter the result is a uniform
    integer in ``[0, capped]``.
    """
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    capped = _capped_delay_ms(policy, attempt)
    if not policy.jitter:
        return capped
    return (rng or _default_rng).randint(0, capped)


def next_attempt_at(
    policy: RetryPolicy,
    attempt: int,
    now: datetime,
    rng: random.Random | None = None,
) -> datetime | None:
    """When to run the next attempt after ``attempt`` failed at ``now``.

    Returns None when the policy is exhausted (``attempt >= max_attempts``);
    the caller then moves the execution to DEAD.
    """
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    # ">=" rather than "==" so an attempt counter that somehow overshot
    # (policy lowered while an execution was in flight) still terminates.
    if attempt >= policy.max_attempts:
        return None
    return now + timedelta(milliseconds=backoff_delay_ms(policy, attempt, rng))
