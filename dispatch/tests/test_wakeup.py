"""The dispatcher's wake-up: LISTEN/NOTIFY on PostgreSQL, and what happens when the listening
connection drops (a PostgreSQL restart ends every connection)."""

import time

import pytest
from django.db import connection
from django.utils import timezone

from dispatch.wakeup import Listener, notify

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listener():
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    listener = Listener()
    yield listener
    listener.close()


def _wait(listener: Listener, seconds: float) -> tuple[bool, float]:
    started = time.monotonic()
    woken = listener.wait(seconds, sleep=time.sleep)
    return woken, time.monotonic() - started


def test_a_committed_notify_wakes_the_listener_at_once(listener):
    notify(timezone.now())  # autocommit: delivered now

    woken, took = _wait(listener, 5)

    assert woken and took < 1


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
    notify(timezone.now())
    woken, took = _wait(listener, 5)
    assert woken and took < 1
