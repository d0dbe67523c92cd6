"""How much waits on the broker beyond a pool's slots (dispatcher/buffer.py), as pure logic."""

import math

from hypothesis import given
from hypothesis import strategies as st

from dispatcher.buffer import HORIZON, BrokerBuffer
from scheduling.admission import Load


def _load(slots: int, queued: int, running: int) -> Load:
    return Load(workers=1, slots=slots, busy=running, queued=queued, running=running)


def test_the_floor_is_slots_times_headroom():
    assert BrokerBuffer(headroom=2.0, most=1000).limit("p", _load(4, 0, 0)) == 8
    assert BrokerBuffer(headroom=1.0, most=1000).limit("p", _load(4, 0, 0)) == 4


def test_it_doubles_while_workers_run_dry_and_shrinks_when_more_than_half_waits():
    buffer = BrokerBuffer(headroom=1.5, most=1000)
    limits = []
    for _ in range(6):  # held back each time, and each time the queue was empty with a slot idle
        limits.append(buffer.limit("p", _load(2, 0, 1)))
        buffer.claimed({"p"})
    assert limits == [3, 4, 6, 10, 18, 34]
    # Now more than half of it waits at each look: it shrinks back, to the floor at least.
    for _ in range(30):
        buffer.limit("p", _load(2, 30, 2))
    assert buffer.limit("p", _load(2, 30, 2)) == 3


def test_a_pool_that_did_not_hold_work_back_does_not_grow():
    buffer = BrokerBuffer(headroom=2.0, most=1000)
    buffer.claimed(set())
    assert buffer.limit("p", _load(2, 0, 0)) == buffer.limit("p", _load(2, 0, 0)) == 4


@given(
    slots=st.integers(0, 64),
    looks=st.lists(st.tuples(st.integers(0, 500), st.integers(0, 64), st.booleans()), max_size=40),
)
def test_the_limit_stays_between_the_floor_and_the_most(slots, looks):
    buffer = BrokerBuffer(headroom=2.0, most=100)
    for queued, running, held in looks:
        limit = buffer.limit("p", _load(slots, queued, min(running, slots)))
        assert 2 * slots <= limit <= slots + max(slots, 100)
        buffer.claimed({"p"} if held else set())


def test_a_pool_keeps_what_its_workers_take_in_the_window_at_their_reported_rate():
    buffer = BrokerBuffer(headroom=2.0, most=1000, window=0.1)
    load = Load(workers=1, slots=2, busy=2, queued=0, running=2, rate=300.0)
    assert buffer.limit("p", load) == 2 + 30


def test_long_runs_never_pile_more_than_the_horizon_of_work_ahead_of_a_newcomer():
    """0.5 s runs on two slots (4 a second): however often the pool runs dry, what waits on the
    broker stays within HORIZON seconds of their work (2 messages), not the doubling's 34."""
    buffer = BrokerBuffer(headroom=2.0, most=1000, window=0.1)
    for _ in range(10):
        limit = buffer.limit("p", Load(workers=1, slots=2, busy=2, queued=0, running=2, rate=4.0))
        buffer.claimed({"p"})
    assert limit == 2 + max(2, math.ceil(4.0 * HORIZON))
