"""A cancel request of a RUNNING execution reaches the cancel listener of the worker running it
(`store().cancel_listener`): NOTIFY sent with the request's transaction on PostgreSQL, a poll of
the RUNNING rows on the embedded default. On both databases."""

import socket
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from executions import transitions
from executions.models import Execution
from store import store

pytestmark = pytest.mark.django_db(transaction=True)
HOST = socket.gethostname()


@pytest.fixture
def listener():
    listener = store().cancel_listener(host=HOST)
    yield listener
    listener.close()


@pytest.fixture
def running(tenant, make_job, drive):
    """A RUNNING execution whose worker is process 4242 of this host."""
    execution = drive(Execution.objects.get(job=make_job(tenant)), "RUNNING")
    Execution.objects.filter(pk=execution.pk).update(worker_id=f"{HOST}:4242")
    return execution


def _heard(listener, seconds: float = 3.0) -> list[str]:
    """What the listener reports within `seconds`: the first report, or nothing."""
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        heard = listener.wait(remaining, time.sleep)
        if heard:
            return heard
    return []


def test_a_cancel_request_names_the_worker_running_the_execution_once(listener, running):
    started = time.monotonic()
    assert transitions.request_cancel(execution_id=running.pk, now=timezone.now(), reason="asked")

    assert _heard(listener) == [f"{HOST}:4242"]
    assert time.monotonic() - started < 1
    assert _heard(listener, 1.0) == []  # reported once, not again at every poll


def test_a_cancel_request_is_not_heard_before_it_commits(listener, running):
    with transaction.atomic():
        assert transitions.request_cancel(execution_id=running.pk, now=timezone.now(), reason="asked")
        if connection.vendor == "sqlite":
            return  # one writer: a poll from another connection would wait for this transaction
        assert _heard(listener, 0.5) == []

    assert _heard(listener) == [f"{HOST}:4242"]


def test_an_execution_that_is_not_running_names_no_worker(listener, tenant, make_job):
    pending = Execution.objects.get(job=make_job(tenant))

    assert not transitions.request_cancel(execution_id=pending.pk, now=timezone.now(), reason="asked")

    assert _heard(listener, 1.0) == []
