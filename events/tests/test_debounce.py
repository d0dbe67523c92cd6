"""Debounce: the events that match a debounced EVENT job fold into one run, due `debounceSec` after
the last of them and at the latest `debounceMaxSec` after the first; once the run is claimed, the
next event opens another. On both stores: the fold re-times an execution the dispatcher may be
claiming at the same moment (events/debounce.py)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from events.debounce import closes_at
from events.models import DebouncedEvent, EventSource
from events.selectors import event_for_handler
from events.services import event_receive
from events.tests.factories import event_job
from executions.models import Execution
from executions.states import ExecutionState

pytestmark = pytest.mark.both_stores


def receive(tenant, now, payload=None, **kwargs):
    return event_receive(
        tenant=tenant, name="invoice.paid", payload=payload or {}, source=EventSource.API, now=now, **kwargs
    ).event


@given(
    quiet=st.integers(1, 3600),
    longest=st.none() | st.integers(1, 7200),
    gaps=st.lists(st.integers(0, 5000), min_size=1, max_size=30),
)
def test_a_window_closes_quiet_after_its_last_event_and_never_past_its_longest_wait(quiet, longest, gaps):
    # The oracle: walk the arrivals one by one; the window is open while its close is after the
    # arrival, and each arrival in it moves the close to quiet after it, capped at opened + longest.
    start = datetime(2027, 3, 14, tzinfo=UTC)
    arrivals = [start]
    for gap in gaps:
        arrivals.append(arrivals[-1] + timedelta(milliseconds=gap))
    opened = close = None
    for at in arrivals:
        if close is None or at > close:
            opened, expected = at, at + timedelta(seconds=quiet)
        else:
            expected = at + timedelta(seconds=quiet)
        if longest is not None:
            expected = max(min(expected, opened + timedelta(seconds=longest)), at)
        close = closes_at(opened=opened, now=at, quiet=quiet, longest=longest)
        assert close == expected
        assert close >= at  # never due before the event that moved it
        if longest is not None:
            assert close <= max(opened + timedelta(seconds=longest), at)


@pytest.mark.django_db
def test_ten_events_fold_into_one_run_due_quiet_after_the_last_that_carries_it_and_the_count(tenant):
    job = event_job(tenant, debounce_sec=3)
    start = timezone.now()
    events = [receive(tenant, start + timedelta(milliseconds=200 * i), {"n": i}) for i in range(10)]

    execution = Execution.objects.get(job=job)
    assert execution.state == ExecutionState.PENDING and execution.origin == "EVENT"
    assert execution.scheduled_for == execution.available_at == events[-1].received_at + timedelta(seconds=3)
    assert execution.event_id == events[-1].pk
    for event in events:  # each event names the run it joined, as one it started
        event.refresh_from_db()
        assert (event.matched, event.execution_ids) == (1, [str(execution.pk)])
    told = event_for_handler(execution.event_id, execution.pk)
    assert told["payload"] == {"n": 9}
    assert told["debounced"] == {"count": 10, "eventIds": [str(event.pk) for event in events]}


@pytest.mark.django_db
def test_the_longest_wait_caps_the_window_from_its_first_event_and_a_later_event_opens_another(tenant):
    job = event_job(tenant, debounce_sec=5, debounce_max_sec=8)
    start = timezone.now()
    for second in range(0, 12, 2):  # every 2 s for 10 s: never quiet for 5
        receive(tenant, start + timedelta(seconds=second))

    first, second = Execution.objects.filter(job=job).order_by("created_at")
    assert first.scheduled_for == start + timedelta(seconds=8)  # 0, 2, 4, 6 and 8 folded
    assert event_for_handler(first.event_id, first.pk)["debounced"]["count"] == 5
    # Due at 8 and not yet claimed: the event at 10 does not move it later, it opens a window.
    assert second.scheduled_for == start + timedelta(seconds=15)


@pytest.mark.django_db
def test_an_event_after_the_run_is_claimed_opens_another_window(tenant, drive):
    job = event_job(tenant, debounce_sec=2)
    start = timezone.now()
    first = receive(tenant, start)
    claimed = drive(Execution.objects.get(job=job), ExecutionState.QUEUED)

    second = receive(tenant, start + timedelta(seconds=3))

    later = Execution.objects.exclude(pk=claimed.pk).get(job=job)
    assert later.event_id == second.pk and later.scheduled_for == second.received_at + timedelta(seconds=2)
    assert Execution.objects.get(pk=claimed.pk).event_id == first.pk
    assert event_for_handler(first.pk, claimed.pk)["debounced"]["count"] == 1
    assert event_for_handler(second.pk, later.pk)["debounced"]["count"] == 1


@pytest.mark.django_db
def test_one_event_folds_into_a_debounced_job_and_starts_a_plain_one(tenant):
    debounced, plain = event_job(tenant, debounce_sec=60, name="debounced"), event_job(tenant, name="plain")
    start = timezone.now()
    receive(tenant, start)
    receive(tenant, start + timedelta(seconds=1))

    assert Execution.objects.filter(job=debounced).count() == 1
    assert Execution.objects.filter(job=plain).count() == 2
    assert DebouncedEvent.objects.count() == 2  # the plain job's runs fold nothing


@pytest.mark.django_db
def test_a_replayed_idempotency_key_folds_nothing(tenant):
    job = event_job(tenant, debounce_sec=60)
    start = timezone.now()
    first = receive(tenant, start, {"a": 1}, idempotency_key="k1")
    again = receive(tenant, start + timedelta(seconds=1), {"a": 1}, idempotency_key="k1")

    assert again.pk == first.pk
    execution = Execution.objects.get(job=job)
    assert execution.scheduled_for == start + timedelta(seconds=60)
    assert event_for_handler(execution.event_id, execution.pk)["debounced"]["count"] == 1


@pytest.mark.django_db
def test_a_paused_debounced_job_folds_nothing_and_its_window_waits(tenant):
    from scheduling.job_changes import job_pause

    job = event_job(tenant, debounce_sec=60)
    start = timezone.now()
    receive(tenant, start)
    job_pause(job=job, now=start)
    receive(tenant, start + timedelta(seconds=10))

    execution = Execution.objects.get(job=job)
    assert execution.scheduled_for == start + timedelta(seconds=60)
    assert event_for_handler(execution.event_id, execution.pk)["debounced"]["count"] == 1
