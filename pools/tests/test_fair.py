"""The fair order (pools/fair.py) as pure logic: shares follow weights, a newcomer is never
behind a backlog, limits hold, and a herd is served one round at a time."""

from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from pools.fair import Contender, FairShare, Share

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _fair(weights: dict[int, int], *, allowance: int = 10**9, virtual_time: float = 0.0, tags=None) -> FairShare:
    tags = tags or {}
    return FairShare(
        virtual_time, {t: Share(weight=w, finish_tag=tags.get(t, 0.0), allowance=allowance) for t, w in weights.items()}
    )


def _serve(fair: FairShare, contenders: list[Contender], starts: int, *, per_claim: int) -> list[int]:
    """`starts` starts given `per_claim` at a time, each claim recorded as the claim does."""
    given_out: list[int] = []
    while len(given_out) < starts:
        order = fair.allocate(min(per_claim, starts - len(given_out)), contenders)
        fair.record(Counter(order))
        given_out += order
    return given_out


@given(
    weights=st.lists(st.integers(1, 10), min_size=1, max_size=8),
    per_claim=st.integers(1, 50),
)
def test_over_a_contended_stretch_starts_follow_weights(weights, per_claim):
    """Every tenant has a backlog: after N starts each has weight/total of them, give or take
    one per claim size (a claim is handed out whole)."""
    tenants = dict(enumerate(weights, start=1))
    fair = _fair(tenants)
    total = sum(weights)
    starts = total * 20
    got = Counter(_serve(fair, [Contender(t, T0) for t in tenants], starts, per_claim=per_claim))
    for t, w in tenants.items():
        assert abs(got[t] - starts * w / total) <= 1 + per_claim


@given(
    backlog_weight=st.integers(1, 10),
    newcomer_weight=st.integers(1, 10),
    served_before=st.integers(0, 10_000),
    free=st.integers(1, 20),
)
def test_a_newcomer_is_never_behind_another_tenants_backlog(backlog_weight, newcomer_weight, served_before, free):
    """Tenant 1 has had `served_before` starts and still has a backlog; tenant 2 arrives with one
    due execution, due later than the whole backlog. It is among the next two starts."""
    fair = _fair({1: backlog_weight, 2: newcomer_weight})
    if served_before:
        _serve(fair, [Contender(1, T0)], served_before, per_claim=100)
    order = fair.allocate(free, [Contender(1, T0), Contender(2, T0 + timedelta(hours=1))])
    if served_before:
        assert order[0] == 2  # the backlog's tag is past the pool's virtual time
    else:
        assert order[:2] == [1, 2][:free]  # equal tags: the older due work first, then the newcomer


def test_an_idle_tenant_cannot_hoard_the_turns_it_did_not_use():
    """Tenant 2 was idle while tenant 1 had 1,000 starts; when it comes back with a backlog of
    its own, the two share evenly from then on instead of tenant 2 taking 1,000 in a row."""
    fair = _fair({1: 1, 2: 1})
    _serve(fair, [Contender(1, T0)], 1000, per_claim=10)
    got = Counter(_serve(fair, [Contender(1, T0), Contender(2, T0)], 100, per_claim=10))
    assert got == {1: 50, 2: 50}


@given(tenants=st.integers(2, 60), free=st.integers(1, 25))
def test_the_midnight_herd_is_served_a_round_at_a_time(tenants, free):
    """Every tenant's first start comes before any tenant's second, whatever the claim size."""
    fair = _fair(dict.fromkeys(range(1, tenants + 1), 1))
    order = _serve(fair, [Contender(t, T0) for t in range(1, tenants + 1)], tenants * 3, per_claim=free)
    seen: Counter[int] = Counter()
    for position, t in enumerate(order):
        seen[t] += 1
        assert seen[t] == position // tenants + 1


@given(allowances=st.lists(st.integers(0, 5), min_size=1, max_size=6), free=st.integers(0, 40))
def test_a_tenant_never_gets_more_than_its_allowance(allowances, free):
    fair = FairShare(0.0, {t: Share(weight=1, finish_tag=0.0, allowance=a) for t, a in enumerate(allowances)})
    got = Counter(fair.allocate(free, [Contender(t, T0) for t in range(len(allowances))]))
    assert all(got[t] <= a for t, a in enumerate(allowances))
    assert sum(got.values()) == min(free, sum(allowances))


def test_weights_three_to_one_interleave():
    fair = _fair({1: 3, 2: 1})
    order = _serve(fair, [Contender(1, T0), Contender(2, T0)], 8, per_claim=1)
    assert Counter(order[:4]) == {1: 3, 2: 1} and Counter(order[4:]) == {1: 3, 2: 1}
