"""The dispatcher's wake-up: LISTEN/NOTIFY on PostgreSQL, and what happens when the listening
connection drops (a PostgreSQL restart ends every connection)."""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from dispatcher.wakeup import DueClock
from store import store
from store.postgres.listeners import ALREADY_DUE, Listener, _due
from store.postgres.store import WAKE_HORIZON

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listener():
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    listener = store().due_listener()
    yield listener
    listener.close()


def _wait(listener: Listener, seconds: float) -> tuple[bool, float]:
    started = time.monotonic()
    woken = listener.wait(seconds, sleep=time.sleep)
    return woken, time.monotonic() - started


def test_a_committed_notify_wakes_the_listener_at_once(listener):
    store().notify_due(timezone.now())  # autocommit: delivered now

    woken, took = _wait(listener, 5)

    assert woken and took < 1


def test_the_listener_answers_the_earliest_due_time_it_heard(listener):
    now = timezone.now()
    for seconds in (30, 5, 60):
        store().notify_due(now + timedelta(seconds=seconds))
    time.sleep(0.1)  # let all three arrive

    assert listener.wait(5, sleep=time.sleep) == now + timedelta(seconds=5)


def test_work_due_beyond_the_horizon_wakes_no_one(listener):
    # A dispatcher asks for the next due time every poll (a second), long before then.
    store().notify_due(timezone.now() + WAKE_HORIZON + timedelta(seconds=5))
    woken, _ = _wait(listener, 0.3)
    assert not woken

    store().notify_due(timezone.now() + WAKE_HORIZON - timedelta(seconds=5))
    woken, _ = _wait(listener, 5)
    assert woken


def test_without_a_notify_the_listener_sleeps_the_whole_wait(listener):
    woken, took = _wait(listener, 0.3)

    assert not woken and took >= 0.3


def test_after_its_connection_dropped_the_listener_polls_then_listens_again(listener, caplog):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [listener._conn.info.backend_pid])
    time.sleep(0.2)  # let the termination reach the listener's socket

    for _ in range(2):  # the first read takes the server's farewell, the second finds it gone
        assert not listener.wait(0.3, sleep=time.sleep)  # and never raises

    assert "polling until it can listen again" in caplog.text
    # The next wait listens on a new connection, so a create wakes it again.
    assert not listener.wait(0.05, sleep=time.sleep)
    store().notify_due(timezone.now())
    woken, took = _wait(listener, 5)
    assert woken and took < 1


def test_a_notification_that_cannot_be_read_counts_as_due_at_once():
    assert _due("soon") == ALREADY_DUE
    assert _due("2027-01-01T00:00:00") == ALREADY_DUE  # no offset: not a time we sent


def test_the_due_clock_asks_again_only_when_what_it_was_told_has_come_or_the_poll_passed():
    """A stream of creates wakes the dispatcher hundreds of times a second; it asks the database
    for the next due time only when the time the database gave has come, or once per poll (work
    made elsewhere without a notification)."""
    poll, now = 1.0, timezone.now()
    clock = DueClock(poll=poll)
    assert clock.stale(now)  # never asked

    clock.asked(now + timedelta(hours=1))
    assert not clock.stale(now)
    assert 0.9 < clock.wait_seconds(now) <= poll  # the poll comes before the hour

    clock.heard(now)  # a create due now: claim at once; the hour is still what lies beyond
    assert clock.wait_seconds(now) <= 0
    clock.claimed(now)
    assert not clock.stale(now) and clock.due == now + timedelta(hours=1)

    clock.heard(now + timedelta(seconds=3))  # a delayed job: sleep until then, not the poll
    clock.heard(now + timedelta(seconds=10))
    assert 0 < clock.wait_seconds(now) <= 3 and clock.due == now + timedelta(seconds=3)
    clock.claimed(now)  # not due yet: still ahead
    assert clock.due == now + timedelta(seconds=3)
    clock.claimed(now + timedelta(seconds=3))
    assert clock.due == now + timedelta(hours=1)

    clock.asked(now + timedelta(seconds=0.3))
    assert not clock.stale(now) and clock.stale(now + timedelta(seconds=0.3))  # that time came

    clock.asked(None)  # nothing pending
    assert not clock.stale(now) and clock.wait_seconds(now) <= poll
    clock.asked_at -= poll
    assert clock.stale(now)  # the poll passed
    clock.asked(None)
    clock.forget()
    assert clock.stale(now)


def test_the_due_clock_never_asks_for_a_negative_sleep():
    """A due time that passed while the claim ran, or a poll already over, is a sleep of zero:
    time.sleep refuses a negative length (the embedded dispatcher's loop failed on it)."""
    now = timezone.now()
    clock = DueClock(poll=0.0)
    clock.asked(now - timedelta(seconds=5))

    assert clock.wait_seconds(now) == 0.0
    clock.asked(None)
    time.sleep(0.01)
    assert clock.wait_seconds(now) == 0.0
