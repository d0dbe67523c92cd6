"""The named rate limits in the claim (scheduling/rate_limiting.py) and at the start
(worker/rate_gate.py), in-process on both stores; GCRA's arithmetic against a token bucket
simulated step by step. With real processes: tests_e2e/test_e2e_rate_limits.py."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from executions.models import Execution
from jobs import registry
from pools import rate_limits
from pools.rate_limits import Limit
from readmodels.pending_reasons import pending_reasons
from testing.steps import dispatch, start, succeed
from worker import rate_gate

pytestmark = [pytest.mark.usefixtures("exact_admission"), pytest.mark.both_stores]


@pytest.fixture
def limited_handler():
    """A handler that declares the limit "payments", registered for the test only (the registry is
    the process's: another test's `rate_limit list` would see it)."""
    registry.register("test.rate-limited", rate_limit="payments")(lambda ctx: None)
    yield "test.rate-limited"
    registry._handlers.pop("test.rate-limited")


# --- GCRA against a bucket of tokens ---------------------------------------------------------------


def _bucket_schedule(rate: float, burst: int, asks: list[float]) -> list[float]:
    """The oracle: a bucket of `burst` tokens refilled at `rate`, starting full; each ask, in
    order, starts at the first moment (not before it asks, nor before the ask before it started)
    the bucket holds a token, and takes it."""
    tokens, last, starts = float(burst), 0.0, []
    for ask in asks:
        at = max(ask, starts[-1] if starts else 0.0)
        tokens = min(burst, tokens + (at - last) * rate)
        if tokens < 1:
            at += (1 - tokens) / rate
            tokens = 1.0
        tokens -= 1
        last = at
        starts.append(at)
    return starts


@settings(max_examples=300, deadline=None)
@given(
    rate=st.sampled_from([0.5, 1.0, 4.0, 20.0, 1000.0]),
    burst=st.integers(1, 5),
    gaps=st.lists(st.floats(0, 3, allow_nan=False), min_size=1, max_size=40),
)
def test_reserve_starts_each_ask_when_a_bucket_of_tokens_would(rate, burst, gaps):
    asks, at = [], 100.0
    for gap in gaps:
        at += gap
        asks.append(at)
    limit, tat, got = Limit("l", rate, burst), 0.0, []
    for ask in asks:
        when, tat = rate_limits.reserve(limit, tat, ask)
        got.append(when)

    assert got == pytest.approx(_bucket_schedule(rate, burst, asks), abs=1e-6)
    # And so never more than burst + rate * L starts in any L seconds.
    for i, first in enumerate(got):
        within = [w for w in got[i:] if w < first + 1.0]
        assert len(within) <= burst + rate * 1.0 + 1e-9


# --- the claim ------------------------------------------------------------------------------------------


def _limited_jobs(make_job, tenant, count, now, **fields):
    fields.setdefault("rate_limit", "payments")
    return [make_job(tenant, run_at=now + timedelta(milliseconds=i), **fields) for i in range(count)]


def test_a_claim_admits_what_the_limit_allows_and_gives_the_rest_their_turns(db, tenant, make_job):
    rate_limits.define(name="payments", per_second=2, burst=1)
    now = timezone.now()
    jobs = _limited_jobs(make_job, tenant, 4, now)
    later = now + timedelta(seconds=1)

    result, sent = dispatch(later, slots=10)

    assert len(sent) == 1 and result.turned == 3 and "default" in result.held_back
    waiting = Execution.objects.filter(job__in=jobs, state="PENDING").order_by("available_at")
    assert [e.available_at for e in waiting] == [later + timedelta(seconds=s) for s in (0.5, 1.0, 1.5)]
    assert all(e.rate_turn_at == e.available_at for e in waiting)
    reasons = pending_reasons(list(waiting), now=later)
    assert {r.code for r in reasons.values()} == {"RATE_LIMITED"}
    assert "payments (2/s, burst 1)" in next(iter(reasons.values())).detail

    # Each at its turn, admitted without being counted again; nothing before it.
    assert dispatch(later + timedelta(seconds=0.4), slots=10)[1] == []
    assert len(dispatch(later + timedelta(seconds=0.5), slots=10)[1]) == 1
    assert len(dispatch(later + timedelta(seconds=1.5), slots=10)[1]) == 2
    assert not Execution.objects.filter(job__in=jobs, state="PENDING").exists()
    assert not Execution.objects.filter(job__in=jobs, rate_turn_at__isnull=False).exists()


def test_a_turn_that_has_come_is_admitted_before_a_backlog_still_without_turns(db, tenant, make_job):
    """A backlog larger than a claim gives turns to: the next claim admits the run whose turn has
    come first, not the backlog in front of it in due order (it used to wait until the whole
    backlog had turns, and then start late, all at once)."""
    rate_limits.define(name="payments", per_second=10, burst=1)
    now = timezone.now()
    _limited_jobs(make_job, tenant, 60, now)
    later = now + timedelta(seconds=1)
    _, (first,) = dispatch(later, slots=2)
    assert Execution.objects.filter(state="PENDING", rate_turn_at__isnull=True).count() > 0  # a backlog is left
    start(first.execution_id, now=later)
    succeed(first.execution_id, now=later)

    come = Execution.objects.exclude(rate_turn_at=None).order_by("rate_turn_at").first()
    assert come.rate_turn_at == later + timedelta(seconds=0.1)

    _, sent = dispatch(later + timedelta(seconds=0.15), slots=2)

    assert [str(d.execution_id) for d in sent] == [str(come.pk)]


def test_a_handler_declares_its_limit_and_a_target_names_another(db, tenant, make_job, limited_handler):
    rate_limits.define(name="payments", per_second=1, burst=1)
    rate_limits.define(name="bulk", per_second=1000, burst=100)
    now = timezone.now()
    _limited_jobs(make_job, tenant, 3, now, handler="test.rate-limited", rate_limit=None)
    _limited_jobs(make_job, tenant, 3, now, handler="test.rate-limited", rate_limit="bulk")

    result, sent = dispatch(now + timedelta(seconds=1), slots=10)

    assert len(sent) == 4 and result.turned == 2  # one of the handler's own, the three naming "bulk"


def test_work_behind_a_limited_backlog_in_its_pool_is_admitted_in_the_same_claim(db, tenant, make_job):
    rate_limits.define(name="payments", per_second=1, burst=1)
    now = timezone.now()
    _limited_jobs(make_job, tenant, 6, now)
    plain = [make_job(tenant, run_at=now + timedelta(seconds=1)) for _ in range(2)]

    sent = dispatch(now + timedelta(seconds=2), slots=3)[1]

    sent_ids = {str(d.execution_id) for d in sent}
    assert {str(job.executions.get().pk) for job in plain} <= sent_ids and len(sent) == 3


def test_a_limit_named_but_not_defined_holds_nothing(db, tenant, make_job, limited_handler):
    rate_limits.define(name="other", per_second=1)
    now = timezone.now()
    _limited_jobs(make_job, tenant, 3, now, rate_limit=None, handler="test.rate-limited")

    assert len(dispatch(now + timedelta(seconds=1), slots=10)[1]) == 3


def test_a_retry_asks_the_limit_again(db, tenant, make_job):
    rate_limits.define(name="payments", per_second=1, burst=1)
    now = timezone.now()
    (job,) = _limited_jobs(make_job, tenant, 1, now, max_attempts=3, initial_delay_ms=0, jitter=False)
    _, (first,) = dispatch(now + timedelta(seconds=1), slots=10)
    start(first.execution_id, now=now + timedelta(seconds=1))
    succeed(first.execution_id, now=now + timedelta(seconds=1))
    assert Execution.objects.get(pk=first.execution_id).rate_turn_at is None
    del job


# --- the start -----------------------------------------------------------------------------------------


def test_the_start_waits_for_its_turn_and_starts_at_it(db, tenant, make_job, monkeypatch):
    """Two runs admitted at once (the claim's turns bunch when a pool was full): the second's
    start is rolled back, waits, and starts a limit's interval after the first."""
    rate_limits.define(name="payments", per_second=4, burst=1)
    now = timezone.now()
    _limited_jobs(make_job, tenant, 2, now)
    Execution.objects.update(rate_turn_at=now)  # both hold turns: admitted together
    sent = dispatch(now + timedelta(seconds=1), slots=10)[1]
    assert len(sent) == 2
    clock = {"now": now + timedelta(seconds=2)}
    slept = []
    monkeypatch.setattr(rate_gate, "db_now", lambda: clock["now"])
    monkeypatch.setattr(rate_gate.time, "monotonic", lambda: clock["now"].timestamp())

    def sleep(seconds):
        slept.append(seconds)
        clock["now"] += timedelta(seconds=seconds)

    monkeypatch.setattr(rate_gate.time, "sleep", sleep)

    def starter(dispatch_):
        def start_at(at):
            row = Execution.objects.get(pk=dispatch_.execution_id)
            from executions import transitions

            return transitions.start(
                execution_id=row.pk, lease_token=row.lease_token, now=at, worker_id="h:1", lease=timedelta(seconds=30)
            )

        return start_at

    with transaction.atomic():
        assert rate_gate.start(starter(sent[0]), stopping=lambda: False) is not None
        assert rate_gate.start(starter(sent[1]), stopping=lambda: False) is not None

    assert slept == [pytest.approx(0.25)]
    started = sorted(Execution.objects.values_list("started_at", flat=True))
    assert started[1] - started[0] == timedelta(seconds=0.25)
