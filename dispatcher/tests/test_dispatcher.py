"""dispatcher.run_once with the in-memory publisher and an injected `now`: the claim, priorities,
misfire and concurrency policies, and what a job's state does as its executions finish."""

import gc
from datetime import UTC, datetime, timedelta

import pytest
from django.test import TestCase
from django.utils import timezone

from background.publisher import InMemoryPublisher
from dispatcher import dispatcher
from executions.models import Execution
from executions.states import InvalidTransition
from jobs import cron
from jobs import transitions as job_transitions
from jobs.models import Job, Priority
from scheduling.execution_changes import execution_cancel
from store import store
from testing.harness import history
from testing.steps import capacity, claim, dispatch, start, succeed
from worker import runner

pytestmark = pytest.mark.django_db


# --- the claim -----------------------------------------------------------------------------------


def test_claim_takes_due_executions_only_and_publishes_them_under_a_new_lease(tenant, make_job, now):
    """PENDING with available_at <= now → QUEUED with lease_token 1, queued_at and a republish
    deadline; the message carries (execution id, lease token, pool, priority). Not-yet-due and
    paused jobs' executions stay PENDING."""
    due = make_job(tenant, run_at=now - timedelta(seconds=1))
    later = make_job(tenant, run_at=now + timedelta(seconds=1))
    paused = make_job(tenant, run_at=now - timedelta(seconds=1))
    assert job_transitions.pause(job_id=paused.pk, now=now)

    sent = claim(now)

    execution = Execution.objects.get(job=due)
    assert [(d.execution_id, d.lease_token, d.pool, d.priority) for d in sent] == [
        (str(execution.pk), 1, "default", Priority.NORMAL)
    ]
    assert execution.state == "QUEUED" and execution.queued_at == now and execution.republish_at > now
    assert history(execution.pk) == [("", "PENDING"), ("PENDING", "QUEUED")]
    assert Execution.objects.get(job=later).state == "PENDING"
    assert Execution.objects.get(job=paused).state == "PENDING"
    assert claim(now) == []  # nothing is claimed twice


def test_a_serving_dispatcher_stamps_what_it_queues_once_it_holds_the_claim_lock(tenant, make_job, now):
    """`now` is read before the claim waits for the claim lock; the clock that serves the claim
    stamps queuedAt (and the republish deadline) after it, never before `now`."""
    due = make_job(tenant, run_at=now - timedelta(seconds=1))
    waited = now + timedelta(milliseconds=150)

    capacity(now, slots=10)
    with TestCase.captureOnCommitCallbacks(execute=True):
        dispatcher.run_once(now=now, publisher=InMemoryPublisher(), clock=lambda: waited)

    execution = Execution.objects.get(job=due)
    assert execution.queued_at == waited and execution.republish_at > waited
    earlier = make_job(tenant, run_at=now - timedelta(seconds=1))
    with TestCase.captureOnCommitCallbacks(execute=True):
        dispatcher.run_once(now=now, publisher=InMemoryPublisher(), clock=lambda: now - timedelta(seconds=5))
    assert Execution.objects.get(job=earlier).queued_at == now  # a clock behind `now` does not move it back


def test_defect7_the_next_due_time_is_read_as_an_aware_time_the_dispatcher_can_compare(tenant, make_job, now):
    """The peek that the dispatcher sleeps by answers the next due time as the ORM reads it, aware,
    on every database: SQLite gives raw SQL's times naive, and comparing one with the dispatcher's
    clock raised in every loop of the embedded default's dispatcher."""
    job = make_job(tenant, run_at=now + timedelta(minutes=5))

    due = store().next_due_at(after=now)

    assert due == Execution.objects.get(job=job).available_at
    assert due.tzinfo is not None and now < due


def test_priorities_high_before_normal_before_low_whatever_their_due_times(tenant, make_job, now):
    """With a backlog in one pool and a small batch, every HIGH is claimed before any NORMAL, and
    every NORMAL before any LOW, even though the LOW ones have been due longest; within a
    priority, the earliest due goes first."""
    names = {}
    # LOW due longest ago, HIGH most recently.
    for offset, (priority, label) in enumerate(
        [(Priority.LOW, "L")] * 3 + [(Priority.NORMAL, "N")] * 3 + [(Priority.HIGH, "H")] * 3
    ):
        job = make_job(tenant, run_at=now - timedelta(minutes=30 - offset), priority=priority)
        names[str(Execution.objects.get(job=job).pk)] = f"{label}{offset % 3 + 1}"

    batches = [sorted(names[d.execution_id] for d in claim(now, limit=2)) for _ in range(5)]

    assert batches == [["H1", "H2"], ["H3", "N1"], ["N2", "N3"], ["L1", "L2"], ["L3"]]


def test_a_cancelled_pending_execution_is_cancelled_at_once_and_never_claimed(tenant, make_job, now):
    """Cancelling a PENDING execution makes it CANCELLED immediately; when its time comes the
    dispatcher does not see it. The one-off job is COMPLETED."""
    job = make_job(tenant, run_at=now + timedelta(seconds=5))
    execution = Execution.objects.get(job=job)

    assert execution_cancel(execution=execution, now=now) == "CANCELLED"

    assert claim(now + timedelta(minutes=1)) == []
    assert history(execution.pk) == [("", "PENDING"), ("PENDING", "CANCELLED")]
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"


# --- misfire policies: the scheduler was down for an hour ----------------------------------------

EVERY_10_MIN = "*/10 * * * *"


def _fires(after: datetime, until: datetime) -> list[datetime]:
    fires, fire = [], cron.next_fire(EVERY_10_MIN, "UTC", after)
    while fire <= until:
        fires.append(fire)
        fire = cron.next_fire(EVERY_10_MIN, "UTC", fire)
    return fires


def _down_for_an_hour(settings, tenant, make_job, policy: str):
    settings.TICKWORK_MISFIRE_GRACE_SECONDS = 60
    now = timezone.now()
    created = now - timedelta(hours=1)
    job = make_job(tenant, type="CRON", schedule=EVERY_10_MIN, misfire_policy=policy, now=created)
    return job, now, _fires(created, now)


def _drain(now: datetime) -> list[list]:
    """dispatcher.run_once at `now` until it claims nothing; what each call published."""
    rounds = []
    while True:
        result, sent = dispatch(now)
        if not result.claimed:
            return rounds
        rounds.append(sent)


def _pending_fire(job) -> datetime:
    (pending,) = Execution.objects.filter(job=job, state="PENDING")
    return pending.scheduled_for


def test_misfire_run_once_runs_one_catch_up_then_the_next_future_fire(settings, tenant, make_job):
    """RUN_ONCE: of the six fires missed, one runs (the first, as the catch-up); the next
    execution is the first fire after now."""
    job, now, missed = _down_for_an_hour(settings, tenant, make_job, "RUN_ONCE")
    assert len(missed) >= 5
    changed = Job.objects.get(pk=job.pk).updated_at

    rounds = _drain(now)

    assert [len(r) for r in rounds] == [1]
    assert Execution.objects.get(pk=rounds[0][0].execution_id).scheduled_for == missed[0]
    assert _pending_fire(job) == cron.next_fire(EVERY_10_MIN, "UTC", now) > now
    # A fire moves the job's next_fire_at only: its updated_at is when it last changed.
    assert Job.objects.values_list("next_fire_at", "updated_at").get(pk=job.pk) == (_pending_fire(job), changed)
    assert Execution.objects.filter(job=job).count() == 2


def test_misfire_run_all_runs_one_execution_per_missed_fire(settings, tenant, make_job):
    """RUN_ALL: every missed fire runs, one execution each and in order (a backfill); then the
    next future fire is pending."""
    job, now, missed = _down_for_an_hour(settings, tenant, make_job, "RUN_ALL")

    rounds = _drain(now)

    ran = [Execution.objects.get(pk=d.execution_id).scheduled_for for r in rounds for d in r]
    assert ran == missed
    assert _pending_fire(job) == cron.next_fire(EVERY_10_MIN, "UTC", now) > now


def test_misfire_skip_cancels_the_missed_fire_and_waits_for_the_next_future_one(settings, tenant, make_job):
    """SKIP: the missed fire is not run: it is CANCELLED with a message saying why, nothing is
    published, and the next fire after now is pending."""
    job, now, missed = _down_for_an_hour(settings, tenant, make_job, "SKIP")

    rounds = _drain(now)

    assert rounds == [[]]  # one claim, nothing published
    skipped = Execution.objects.get(job=job, scheduled_for=missed[0])
    assert skipped.state == "CANCELLED"
    assert history(skipped.pk)[-1] == ("QUEUED", "CANCELLED")
    assert "misfirePolicy SKIP" in skipped.events.last().message
    assert _pending_fire(job) == cron.next_fire(EVERY_10_MIN, "UTC", now) > now


# --- concurrency policies ------------------------------------------------------------------------

EVERY_MINUTE = "* * * * *"


def _overlapping(tenant, make_job, policy: str):
    """A per-minute cron job whose first fire is RUNNING when the second falls due."""
    created = timezone.now()
    job = make_job(tenant, type="CRON", schedule=EVERY_MINUTE, concurrency_policy=policy, now=created)
    first = cron.next_fire(EVERY_MINUTE, "UTC", created)
    (sent,) = claim(first)
    return job, first, sent.execution_id


def test_forbid_skips_a_fire_while_the_previous_run_is_active(tenant, make_job):
    """FORBID: a fire due while the previous run is RUNNING is CANCELLED with a message and not
    published; once the previous run is over, the next fire runs."""
    job, first, running_id = _overlapping(tenant, make_job, "FORBID")
    start(running_id, now=first)
    second = first + timedelta(minutes=1)

    assert claim(second) == []

    skipped = Execution.objects.get(job=job, scheduled_for=second)
    assert skipped.state == "CANCELLED"
    assert "concurrencyPolicy FORBID" in skipped.events.last().message
    assert Execution.objects.get(pk=running_id).state == "RUNNING"
    succeed(running_id, now=second + timedelta(seconds=5))
    third = second + timedelta(minutes=1)
    assert [Execution.objects.get(pk=d.execution_id).scheduled_for for d in claim(third)] == [third]
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"


def test_replace_asks_the_running_run_to_cancel_and_runs_the_new_fire(tenant, make_job):
    """REPLACE: when the next fire is due, the RUNNING run gets a cancel request (its worker stops
    it at the next heartbeat) and the new fire is published."""
    _job, first, running_id = _overlapping(tenant, make_job, "REPLACE")
    start(running_id, now=first)
    second = first + timedelta(minutes=1)

    sent = claim(second)

    assert [Execution.objects.get(pk=d.execution_id).scheduled_for for d in sent] == [second]
    replaced = Execution.objects.get(pk=running_id)
    assert replaced.state == "RUNNING" and replaced.cancel_requested_at == second
    assert "concurrencyPolicy REPLACE" in replaced.events.last().message


def test_replace_cancels_a_queued_run_at_once(tenant, make_job):
    """REPLACE: a previous run still QUEUED (not started) is CANCELLED outright."""
    _job, first, queued_id = _overlapping(tenant, make_job, "REPLACE")
    second = first + timedelta(minutes=1)

    sent = claim(second)

    assert len(sent) == 1
    assert Execution.objects.get(pk=queued_id).state == "CANCELLED"


# --- job state follows its executions (runs the real runner in-process) ---------------------------


def _run_in_process(job) -> Execution:
    (sent,) = claim(timezone.now())
    runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token)
    return Execution.objects.get(pk=sent.execution_id)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("handler", "final"), [("noop", "SUCCEEDED"), ("fail", "DEAD")])
def test_a_one_off_job_is_completed_when_its_execution_is_terminal(tenant, make_job, handler, final):
    """A ONCE job is ACTIVE while its execution can still run and COMPLETED once it is terminal
    (SUCCEEDED, or DEAD after its only attempt)."""
    job = make_job(tenant, run_at=timezone.now() - timedelta(seconds=1), handler=handler, max_attempts=1)
    assert job.state == "ACTIVE"

    execution = _run_in_process(job)

    assert execution.state == final
    job.refresh_from_db()
    assert job.standing == "COMPLETED" and job.shown_next_fire_at is None


@pytest.mark.django_db(transaction=True)
def test_a_one_off_job_stays_active_while_a_retry_is_pending(tenant, make_job):
    """A failed attempt with attempts left puts the execution back to PENDING: the job is not
    COMPLETED yet."""
    job = make_job(tenant, run_at=timezone.now() - timedelta(seconds=1), handler="fail", max_attempts=2)

    execution = _run_in_process(job)

    assert execution.state == "PENDING" and execution.attempt == 2
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"


@pytest.mark.django_db(transaction=True)
def test_a_cron_job_stays_active_when_a_run_finishes(tenant, make_job):
    """A CRON job's run ending does not complete the job: it stays ACTIVE with its next fire."""
    created = timezone.now() - timedelta(minutes=2)
    job = make_job(tenant, type="CRON", schedule=EVERY_MINUTE, now=created)

    execution = _run_in_process(job)

    assert execution.state == "SUCCEEDED"
    job.refresh_from_db()
    assert job.state == "ACTIVE"
    assert job.next_fire_at == _pending_fire(job) > execution.scheduled_for


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_finished_execution_is_refused_and_changes_nothing(tenant, make_job, api):
    """A finished execution cannot be cancelled: the service raises InvalidTransition and the API
    answers 409; the state and the history are unchanged."""
    job = make_job(tenant, run_at=timezone.now() - timedelta(seconds=1))
    execution = _run_in_process(job)
    before = history(execution.pk)

    with pytest.raises(InvalidTransition):
        execution_cancel(execution=execution, now=timezone.now())
    response = api.post(f"/v1/executions/{execution.pk}/cancel")

    assert response.status_code == 409, response.content
    assert Execution.objects.get(pk=execution.pk).state == "SUCCEEDED"
    assert history(execution.pk) == before


def test_run_once_counts(tenant, make_job):
    """The result says how many were claimed, published, skipped and materialised."""
    now = datetime(2031, 1, 1, 12, 0, tzinfo=UTC)
    make_job(tenant, run_at=now - timedelta(seconds=1), now=now - timedelta(hours=1))
    make_job(tenant, type="CRON", schedule=EVERY_MINUTE, misfire_policy="SKIP", now=now - timedelta(hours=1))

    result, sent = dispatch(now)

    assert len(sent) == 1
    assert (result.claimed, result.published, result.skipped, result.materialised) == (2, 1, 1, 1)


def test_replace_leaves_the_running_run_alone_when_the_new_fire_is_skipped_as_missed(settings, tenant, make_job):
    """REPLACE with misfirePolicy SKIP: a missed fire that is skipped does not run, so it replaces
    nothing: the active run is not asked to cancel."""
    settings.TICKWORK_MISFIRE_GRACE_SECONDS = 60
    created = timezone.now()
    job = make_job(
        tenant, type="CRON", schedule=EVERY_MINUTE, concurrency_policy="REPLACE", misfire_policy="SKIP", now=created
    )
    first = cron.next_fire(EVERY_MINUTE, "UTC", created)
    (sent,) = claim(first)
    start(sent.execution_id, now=first)

    # The second fire is claimed ten minutes late: missed, so skipped.
    assert claim(first + timedelta(minutes=11)) == []

    assert Execution.objects.get(job=job, scheduled_for=first + timedelta(minutes=1)).state == "CANCELLED"
    running = Execution.objects.get(pk=sent.execution_id)
    assert running.state == "RUNNING" and running.cancel_requested_at is None


@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_before_its_heartbeat_saw_it_is_cancelled_not_retried(tenant, make_job):
    """The handler raises after a cancel request that no heartbeat has passed on yet: the run ends
    CANCELLED (and its job with it), not FAILED and back to PENDING for another attempt."""
    import testing.handlers_for_tests  # noqa: F401  (registers the handler)

    job = make_job(
        tenant, run_at=timezone.now() - timedelta(seconds=1), handler="test-cancelled-then-raises", max_attempts=3
    )

    execution = _run_in_process(job)

    assert execution.state == "CANCELLED" and execution.attempt == 1
    assert "failed after the cancel request" in execution.events.last().message


# --- set-based materialisation -----------------------------------------------------------------------


def _herd(tenant, make_job, now, count: int, schedule: str = "*/5 * * * *") -> list[Job]:
    """`count` cron jobs whose first fire is due at `now` (made as of ten minutes before)."""
    return [make_job(tenant, type="CRON", schedule=schedule, now=now - timedelta(minutes=10)) for _ in range(count)]


def test_a_claim_of_many_fires_makes_every_next_fire_in_a_constant_number_of_statements(
    tenant, make_job, now, django_assert_max_num_queries
):
    """Claiming 60 fires of 60 jobs makes the 60 next fires (each with its event) and moves the
    60 jobs' next_fire_at, in as many statements as claiming 5 of 5 jobs takes."""
    few = _herd(tenant, make_job, now, 5)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as small:
        assert len(claim(now)) == 5
    many = _herd(tenant, make_job, now + timedelta(minutes=5), 60)

    with django_assert_max_num_queries(len(small.captured_queries)):
        assert len(claim(now + timedelta(minutes=5))) == 60 + 5  # the first five fire again too

    for job in few + many:
        job.refresh_from_db()
        (pending,) = Execution.objects.filter(job=job, state="PENDING")
        assert job.next_fire_at == pending.scheduled_for > now + timedelta(minutes=5)
        assert history(pending.pk) == [("", "PENDING")]


@pytest.mark.parametrize("dies_in", ["create_fires", "advance_jobs"])
def test_a_dispatcher_that_dies_while_making_next_fires_loses_and_doubles_nothing(
    tenant, make_job, now, monkeypatch, dies_in
):
    """A claim that fails at any step of making the next fires rolls back whole: the fires stay
    PENDING with no successor and nothing published; the next claim runs each fire once and makes
    each successor once."""
    jobs = _herd(tenant, make_job, now, 20)
    real = getattr(type(store()), dies_in)

    def dies(*args, **kwargs):
        real(*args, **kwargs)  # the statement ran; the process dies before the commit
        raise SystemExit("killed")

    monkeypatch.setattr(type(store()), dies_in, dies)
    with pytest.raises(SystemExit):
        claim(now)
    monkeypatch.setattr(type(store()), dies_in, real)
    assert Execution.objects.filter(job__in=jobs).count() == 20
    assert set(Execution.objects.filter(job__in=jobs).values_list("state", flat=True)) == {"PENDING"}

    sent = claim(now)

    assert len(sent) == 20 and claim(now) == []
    for job in jobs:
        job.refresh_from_db()
        fires = Execution.objects.filter(job=job).order_by("scheduled_for")
        assert [e.state for e in fires] == ["QUEUED", "PENDING"]
        assert job.next_fire_at == fires[1].scheduled_for == cron.next_fire("*/5 * * * *", "UTC", now)


def test_a_fire_made_already_is_skipped_not_doubled_and_the_claim_goes_on(tenant, make_job, now):
    """When a job's next fire exists already (made by an earlier claim of a fire retried, or by
    hand), the set-based insert skips it: one execution per (job, fire), the database decides."""
    (job,) = _herd(tenant, make_job, now, 1)
    following = cron.next_fire("*/5 * * * *", "UTC", now)
    from executions import transitions

    transitions.create(job=job, scheduled_for=following, now=now, wake=False)

    assert len(claim(now)) == 1

    assert Execution.objects.filter(job=job, scheduled_for=following).count() == 1
    job.refresh_from_db()
    assert job.next_fire_at == following


def test_ready_leaves_what_the_process_holds_out_of_the_collectors_passes():
    gc.unfreeze()
    try:
        dispatcher.ready()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # this test process's objects are the collector's again
