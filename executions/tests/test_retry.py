from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from executions.retry import Backoff, RetryPolicy, backoff_delay_ms, next_attempt_at

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

policies = st.builds(
    RetryPolicy,
    max_attempts=st.integers(min_value=1, max_value=1000),
    backoff=st.sampled_from(Backoff),
    initial_delay_ms=st.integers(min_value=0, max_value=10**7),
    max_delay_ms=st.integers(min_value=0, max_value=10**9),
    jitter=st.booleans(),
)
# Deliberately includes absurd values: a corrupted attempt counter must not
# hang the worker computing 2**attempt.
attempts = st.integers(min_value=1, max_value=10**12)


# -- examples ---------------------------------------------------------------


def test_exponential_doubles_from_initial() -> None:
    p = RetryPolicy(max_attempts=10, initial_delay_ms=1000, max_delay_ms=60_000, jitter=False)
    assert [backoff_delay_ms(p, a) for a in range(1, 9)] == [
        1000,
        2000,
        4000,
        8000,
        16_000,
        32_000,
        60_000,
        60_000,
    ]


def test_fixed_is_constant() -> None:
    p = RetryPolicy(backoff=Backoff.FIXED, initial_delay_ms=1500, jitter=False)
    assert {backoff_delay_ms(p, a) for a in range(1, 50)} == {1500}


def test_fixed_is_capped_too() -> None:
    p = RetryPolicy(backoff=Backoff.FIXED, initial_delay_ms=5000, max_delay_ms=2000, jitter=False)
    assert backoff_delay_ms(p, 1) == 2000


def test_initial_above_cap_is_capped_on_first_retry() -> None:
    p = RetryPolicy(initial_delay_ms=90_000, max_delay_ms=60_000, jitter=False)
    assert backoff_delay_ms(p, 1) == 60_000


def test_jitter_stays_within_capped_delay_and_is_seedable() -> None:
    p = RetryPolicy(initial_delay_ms=1000, max_delay_ms=60_000, jitter=True)
    values = [backoff_delay_ms(p, 3, random.Random(seed)) for seed in range(200)]
    assert all(0 <= v <= 4000 for v in values)
    # Full jitter, not "equal jitter": values below half the delay occur.
    assert min(values) < 2000
    assert backoff_delay_ms(p, 3, random.Random(42)) == backoff_delay_ms(p, 3, random.Random(42))


def test_backoff_accepts_plain_string() -> None:
    p = RetryPolicy(backoff="FIXED", initial_delay_ms=10, jitter=False)  # type: ignore[arg-type]
    assert p.backoff is Backoff.FIXED
    assert backoff_delay_ms(p, 5) == 10


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"initial_delay_ms": -1},
        {"max_delay_ms": -1},
        {"backoff": "LINEAR"},
    ],
)
def test_invalid_policy_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_attempt_is_one_based() -> None:
    with pytest.raises(ValueError):
        backoff_delay_ms(RetryPolicy(), 0)
    with pytest.raises(ValueError):
        next_attempt_at(RetryPolicy(), 0, NOW)


def test_next_attempt_at_adds_delay() -> None:
    p = RetryPolicy(max_attempts=3, initial_delay_ms=1000, jitter=False)
    assert next_attempt_at(p, 1, NOW) == NOW + timedelta(seconds=1)
    assert next_attempt_at(p, 2, NOW) == NOW + timedelta(seconds=2)


def test_exhausted_exactly_at_max_attempts() -> None:
    p = RetryPolicy(max_attempts=3, jitter=False)
    assert next_attempt_at(p, 2, NOW) is not None
    assert next_attempt_at(p, 3, NOW) is None
    assert next_attempt_at(p, 4, NOW) is None


def test_single_attempt_policy_never_retries() -> None:
    assert next_attempt_at(RetryPolicy(max_attempts=1), 1, NOW) is None


def test_huge_attempt_returns_cap_quickly() -> None:
    p = RetryPolicy(initial_delay_ms=1, max_delay_ms=60_000, jitter=False)
    assert backoff_delay_ms(p, 10**18) == 60_000


# -- properties -------------------------------------------------------------


@given(policies, attempts, st.integers(min_value=0, max_value=2**32))
def test_delay_within_zero_and_cap(policy: RetryPolicy, attempt: int, seed: int) -> None:
    delay = backoff_delay_ms(policy, attempt, random.Random(seed))
    assert isinstance(delay, int)
    assert 0 <= delay <= policy.max_delay_ms
    if policy.backoff is Backoff.FIXED:
        assert delay <= policy.initial_delay_ms


@given(policies, st.integers(min_value=1, max_value=10**6), st.integers(min_value=1, max_value=10**6))
def test_monotone_without_jitter(policy: RetryPolicy, a: int, b: int) -> None:
    p = RetryPolicy(
        max_attempts=policy.max_attempts,
        backoff=policy.backoff,
        initial_delay_ms=policy.initial_delay_ms,
        max_delay_ms=policy.max_delay_ms,
        jitter=False,
    )
    lo, hi = sorted((a, b))
    assert backoff_delay_ms(p, lo) <= backoff_delay_ms(p, hi)


@given(policies, st.integers(min_value=1, max_value=200))
def test_exponential_without_jitter_matches_formula(policy: RetryPolicy, attempt: int) -> None:
    p = RetryPolicy(
        backoff=Backoff.EXPONENTIAL,
        initial_delay_ms=policy.initial_delay_ms,
        max_delay_ms=policy.max_delay_ms,
        jitter=False,
    )
    # The reference formula is fine for small attempts; the implementation
    # must agree with it despite clamping the exponent.
    expected = min(policy.initial_delay_ms * 2 ** (attempt - 1), policy.max_delay_ms)
    assert backoff_delay_ms(p, attempt) == expected


@given(policies, attempts, st.integers(min_value=0, max_value=2**32))
def test_none_iff_exhausted(policy: RetryPolicy, attempt: int, seed: int) -> None:
    result = next_attempt_at(policy, attempt, NOW, random.Random(seed))
    if attempt >= policy.max_attempts:
        assert result is None
    else:
        assert result is not None
        assert NOW <= result <= NOW + timedelta(milliseconds=policy.max_delay_ms)


@given(st.sampled_from(Backoff), st.booleans(), st.integers(min_value=10**6, max_value=10**30))
def test_huge_attempts_do_not_overflow(backoff: Backoff, jitter: bool, attempt: int) -> None:
    p = RetryPolicy(max_attempts=10**31, backoff=backoff, initial_delay_ms=1000, max_delay_ms=3_600_000, jitter=jitter)
    delay = backoff_delay_ms(p, attempt, random.Random(0))
    assert 0 <= delay <= 3_600_000
    assert next_attempt_at(p, attempt, NOW, random.Random(0)) is not None
