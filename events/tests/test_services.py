"""Receiving an event: stored with what it started, in one transaction; only the tenant's ACTIVE
event jobs on its name whose filter it satisfies start, once each."""

from datetime import timedelta

import pytest
from django.utils import timezone

from events.models import Event, EventSource
from events.selectors import event_for_handler
from events.services import MIN_RETENTION, event_receive, events_prune
from events.tests.factories import event_job, workflow_event_job
from executions.models import Execution, Origin, Run
from executions.states import ExecutionState
from scheduling.job_changes import job_cancel, job_pause
from scheduling.job_creation import IdempotencyConflict

pytestmark = pytest.mark.django_db


def receive(tenant, name="invoice.paid", payload=None, **kwargs):
    kwargs.setdefault("now", timezone.now())
    kwargs.setdefault("source", EventSource.API)
    return event_receive(tenant=tenant, name=name, payload=payload or {}, **kwargs)


def test_a_matching_event_starts_one_pending_execution_per_job_due_now(tenant):
    first, second = event_job(tenant), event_job(tenant, name="second")
    now = timezone.now()

    received = receive(tenant, payload={"invoice": "in_1"}, now=now)

    event = Event.objects.get()
    assert received.created and received.event == event
    assert (event.matched, event.source, event.received_at) == (2, "api", now)
    executions = [Execution.objects.get(pk=pk) for pk in event.execution_ids]
    assert [e.job_id for e in executions] == [first.pk, second.pk]  # the jobs by creation
    for execution in executions:
        assert (execution.state, execution.origin, execution.event_id) == (
            ExecutionState.PENDING,
            Origin.EVENT,
            event.pk,
        )
        assert execution.scheduled_for == execution.available_at == now
    assert event.run_ids == []


def test_a_workflow_event_job_starts_a_run_with_its_steps_in_order(tenant):
    job = workflow_event_job(tenant)

    event = receive(tenant).event

    run = Run.objects.get()
    assert (run.job_id, run.origin, run.event_id) == (job.pk, Origin.EVENT, event.pk)
    assert event.run_ids == [str(run.pk)]
    steps = [Execution.objects.get(pk=pk) for pk in event.execution_ids]
    assert [(s.step, s.state, s.event_id) for s in steps] == [
        ("bill", ExecutionState.PENDING, event.pk),
        ("mail", ExecutionState.BLOCKED, event.pk),
    ]


def test_the_filter_matches_only_equal_values_of_the_same_type(tenant):
    eur = event_job(tenant, name="eur", event_filter={"currency": "EUR"})
    one = event_job(tenant, name="qty 1", event_filter={"quantity": 1})
    text_one = event_job(tenant, name="qty '1'", event_filter={"quantity": "1"})

    def started(payload):
        event = receive(tenant, payload=payload).event
        return {Execution.objects.get(pk=pk).job_id for pk in event.execution_ids}

    assert started({"currency": "EUR", "quantity": 1}) == {eur.pk, one.pk}
    assert started({"currency": "USD", "quantity": "1"}) == {text_one.pk}
    assert started({"currency": "eur", "quantity": True}) == set()
    assert started({}) == set()


def test_paused_cancelled_other_named_and_non_event_jobs_do_not_start(tenant, make_job):
    paused, cancelled = event_job(tenant, name="paused"), event_job(tenant, name="cancelled")
    job_pause(job=paused, now=timezone.now())
    job_cancel(job=cancelled, now=timezone.now())
    event_job(tenant, on="invoice.voided")
    make_job(tenant, type="CRON", name="invoice.paid")
    before = Execution.objects.count()

    event = receive(tenant).event

    assert (event.matched, event.execution_ids) == (0, [])
    assert Execution.objects.count() == before
    assert not Execution.objects.filter(job__in=[paused, cancelled]).exists()


def test_an_event_that_matches_nothing_is_stored_with_matched_zero(tenant):
    received = receive(tenant, name="nobody.listens", payload={"x": 1})

    assert received.created
    assert Event.objects.filter(name="nobody.listens", matched=0, payload={"x": 1}).exists()
    assert not Execution.objects.exists()


def test_an_event_never_starts_another_tenants_jobs(tenant, other_tenant):
    theirs = event_job(other_tenant)

    event = receive(tenant).event

    assert event.matched == 0
    assert not Execution.objects.filter(job=theirs).exists()


def test_the_same_key_again_answers_the_first_event_and_starts_nothing(tenant):
    event_job(tenant)
    first = receive(tenant, payload={"n": 1}, idempotency_key="k1")

    again = receive(tenant, payload={"n": 1}, idempotency_key="k1")

    assert not again.created
    assert again.event.pk == first.event.pk
    assert again.event.execution_ids == first.event.execution_ids
    assert (Event.objects.count(), Execution.objects.count()) == (1, 1)


@pytest.mark.parametrize("change", [{"payload": {"n": 2}}, {"name": "invoice.voided"}])
def test_the_same_key_with_another_event_is_a_conflict_and_creates_nothing(tenant, change):
    event_job(tenant)
    receive(tenant, payload={"n": 1}, idempotency_key="k1")

    with pytest.raises(IdempotencyConflict):
        receive(tenant, **{"payload": {"n": 1}, **change}, idempotency_key="k1")

    assert (Event.objects.count(), Execution.objects.count()) == (1, 1)


def test_keys_are_per_tenant(tenant, other_tenant):
    receive(tenant, idempotency_key="k1")

    assert receive(other_tenant, idempotency_key="k1").created
    assert Event.objects.count() == 2


def test_the_handler_is_told_of_its_event(tenant):
    event_job(tenant)
    event = receive(tenant, payload={"invoice": "in_1"}).event
    execution = Execution.objects.get()

    told = event_for_handler(execution.event_id)

    assert told == {
        "id": str(event.pk),
        "name": "invoice.paid",
        "payload": {"invoice": "in_1"},
        "receivedAt": event.received_at.isoformat().replace("+00:00", "Z"),
    }
    assert told["receivedAt"].endswith("Z")
    assert event_for_handler(None) is None
    Event.objects.all().delete()
    assert event_for_handler(execution.event_id) is None


def test_pruning_keeps_events_and_their_keys_for_the_idempotency_window_at_least(tenant):
    now = timezone.now()
    old = receive(tenant, now=now - MIN_RETENTION - timedelta(minutes=1), idempotency_key="old").event
    young = receive(tenant, now=now - MIN_RETENTION + timedelta(minutes=1), idempotency_key="young").event

    # A retention shorter than the window (an operator's TICKWORK_RETENTION_DAYS=0) prunes no sooner.
    assert events_prune(now=now, retention=timedelta(0), limit=100) == 1

    assert list(Event.objects.values_list("pk", flat=True)) == [young.pk]
    assert not Event.objects.filter(pk=old.pk).exists()
    assert receive(tenant, idempotency_key="young").created is False


def test_pruning_honours_the_retention_and_the_limit_oldest_first(tenant):
    now = timezone.now()
    events = [receive(tenant, now=now - timedelta(days=40 - day)).event for day in range(3)]

    assert events_prune(now=now, retention=timedelta(days=30), limit=2) == 2
    assert list(Event.objects.values_list("pk", flat=True)) == [events[2].pk]
    assert events_prune(now=now, retention=timedelta(days=30), limit=2) == 1
    assert events_prune(now=now, retention=timedelta(days=30), limit=2) == 0
