"""The named transitions' writes: one conditional move, its event, and the job's settling, on
both stores.

On PostgreSQL a transition is one statement (the move, its event and, after a terminal state, the
job's settling); these pin what that statement must keep of the step-by-step version.
"""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from executions import transitions
from executions.models import Execution, ExecutionEvent
from executions.standing import completed
from executions.states import ExecutionState as S
from jobs.models import Job
from scheduling.job_changes import job_trigger
from store import Success, store
from testing import harness


def _queued_then_running(execution, now):
    """PENDING → QUEUED → RUNNING, under lease token 1."""
    assert transitions.queue_many([execution.pk], now=now, publish_grace=timedelta(seconds=30))
    assert transitions.start(
        execution_id=execution.pk, lease_token=1, now=now, worker_id="w:1", lease=timedelta(seconds=30)
    )


@pytest.mark.django_db
def test_a_move_records_its_event_with_the_values_after_the_move(tenant, make_job):
    """The event carries the attempt and worker as the row has them after the update."""
    now = timezone.now()
    execution = make_job(tenant).executions.get()
    _queued_then_running(execution, now)

    row = Execution.objects.get(pk=execution.pk)
    assert (row.state, row.publish_count, row.worker_id) == (S.RUNNING, 1, "w:1")
    (started,) = [e for e in harness.events(execution.pk) if e.to_state == S.RUNNING]
    assert (started.from_state, started.worker_id, started.attempt, started.message) == (S.QUEUED, "w:1", 1, "started")
    assert started.at == now


@pytest.mark.django_db
def test_a_move_that_does_not_match_changes_nothing(tenant, make_job):
    """Wrong source state or a stale lease token: False, no update and no event."""
    now = timezone.now()
    execution = make_job(tenant).executions.get()
    _queued_then_running(execution, now)
    before = len(harness.events(execution.pk))

    assert not transitions.start(
        execution_id=execution.pk, lease_token=1, now=now, worker_id="w:2", lease=timedelta(seconds=30)
    )
    assert not transitions.succeed(execution_id=execution.pk, lease_token=0, now=now, result=None)

    assert Execution.objects.get(pk=execution.pk).state == S.RUNNING
    assert len(harness.events(execution.pk)) == before


@pytest.mark.django_db
def test_a_job_with_another_open_execution_is_not_completed(tenant, make_job):
    """A one-off reads COMPLETED once none of its executions can run (executions/standing.py):
    not while another of its executions can, and then changed when the last one ended."""
    now = timezone.now()
    job = make_job(tenant, run_at=now - timedelta(seconds=1))
    first = job.executions.get()
    second = job_trigger(job=job, now=now)
    _queued_then_running(first, now)

    assert transitions.succeed(execution_id=first.pk, lease_token=1, now=now, result=None)
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"

    assert transitions.cancel(execution_id=second.pk, now=now, reason="cancelled")
    job = Job.objects.get(pk=job.pk)
    assert (job.standing, job.shown_next_fire_at, job.ended_at) == ("COMPLETED", None, now)
    assert job.state == "ACTIVE"  # as stored: the end of its runs wrote nothing of it


@pytest.mark.django_db
def test_a_cron_job_is_not_completed_by_its_run_ending(tenant, make_job):
    now = timezone.now()
    job = make_job(tenant, type="CRON", schedule="* * * * *")
    execution = job.executions.get()

    assert transitions.cancel(execution_id=execution.pk, now=now, reason="cancelled")

    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_a_failed_move_rolls_back_to_its_savepoint(tenant, make_job):
    """A move that fails inside the caller's transaction leaves the caller's transaction usable."""
    now = timezone.now()
    execution = make_job(tenant).executions.get()

    with transaction.atomic():
        with pytest.raises(IntegrityError):  # QUEUED needs queued_at and republish_at (a CHECK)
            store().move(execution_id=execution.pk, source=S.PENDING, target=S.QUEUED, now=now, values={})
        assert Execution.objects.get(pk=execution.pk).state == S.PENDING  # still usable

    assert not [e for e in harness.events(execution.pk) if e.to_state == S.QUEUED]


@pytest.mark.django_db
def test_a_set_move_records_one_event_per_row(tenant, make_job):
    now = timezone.now()
    executions = [make_job(tenant).executions.get() for _ in range(3)]
    Execution.objects.filter(pk__in=[e.pk for e in executions]).update(state=S.DEAD, finished_at=now)

    moved, _ = store().discard_dead([e.pk for e in executions], now=now, message="bulk")

    assert {m.id for m in moved} == {e.pk for e in executions}
    events = ExecutionEvent.objects.filter(execution__in=executions, to_state=S.DISCARDED)
    assert sorted((str(e.execution_id), e.from_state, e.message) for e in events) == sorted(
        (str(e.pk), S.DEAD, "bulk") for e in executions
    )
    assert Job.objects.filter(completed(), pk__in=[e.job_id for e in executions]).count() == 3


@pytest.mark.django_db
def test_successes_are_recorded_together_each_under_its_own_lease(tenant, make_job):
    """One statement records a batch: each run still under its token moves to SUCCEEDED with its
    result, finish time and event; a run whose lease moved on is left as it was; a one-off job
    whose two executions both finish in the batch is completed."""
    now = timezone.now()
    job = make_job(tenant, run_at=now - timedelta(seconds=1))
    first, second = job.executions.get(), job_trigger(job=job, now=now)
    fenced = make_job(tenant).executions.get()
    for execution in (first, second, fenced):
        _queued_then_running(execution, now)
    done = [now + timedelta(seconds=i) for i in (1, 2, 3)]

    recorded = transitions.succeed_many(
        [
            Success(first.pk, 1, {"n": 1}, done[0]),
            Success(second.pk, 1, None, done[1]),
            Success(fenced.pk, 7, {"n": 3}, done[2]),  # not its token
        ],
        now=now + timedelta(seconds=5),
    )

    assert recorded == {str(first.pk), str(second.pk)}
    rows = {e.pk: e for e in Execution.objects.filter(pk__in=[first.pk, second.pk, fenced.pk])}
    assert (rows[first.pk].state, rows[first.pk].result, rows[first.pk].finished_at) == (S.SUCCEEDED, {"n": 1}, done[0])
    assert (rows[second.pk].state, rows[second.pk].result, rows[second.pk].finished_at) == (S.SUCCEEDED, None, done[1])
    assert (rows[fenced.pk].state, rows[fenced.pk].finished_at) == (S.RUNNING, None)
    events = sorted(
        (e for pk in (first.pk, second.pk, fenced.pk) for e in harness.events(pk) if e.to_state == S.SUCCEEDED),
        key=lambda e: e.at,
    )
    assert [(e.execution_id, e.at, e.from_state, e.worker_id) for e in events] == [
        (first.pk, done[0], S.RUNNING, "w:1"),
        (second.pk, done[1], S.RUNNING, "w:1"),
    ]
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"
    assert Job.objects.get(pk=fenced.job_id).standing == "ACTIVE"


@pytest.mark.django_db
def test_defect1_an_unstorable_result_is_escaped_and_the_rest_of_its_batch_recorded(tenant, other_tenant, make_job):
    """A result that PostgreSQL cannot store as it is (a NUL, a lone surrogate, NaN) is written
    out, and the statement that records it records another tenant's runs of the batch too."""
    now = timezone.now()
    poison = make_job(tenant).executions.get()
    good = [make_job(other_tenant).executions.get() for _ in range(2)]
    for execution in (poison, *good):
        _queued_then_running(execution, now)

    recorded = transitions.succeed_many(
        [
            Success(good[0].pk, 1, {"n": 0}, now),
            Success(poison.pk, 1, {"note": "a\x00b", "k\ud800": ["\udfff", float("nan"), float("-inf")]}, now),
            Success(good[1].pk, 1, {"n": 1}, now),
        ],
        now=now,
    )

    assert recorded == {str(poison.pk), *(str(e.pk) for e in good)}
    assert Execution.objects.get(pk=poison.pk).result == {
        "note": "a\\u0000b",
        "k\\ud800": ["\\udfff", "NaN", "-Infinity"],
    }
    assert [Execution.objects.get(pk=e.pk).result for e in good] == [{"n": 0}, {"n": 1}]


@pytest.mark.django_db
def test_defect2_an_error_or_result_with_a_nul_or_lone_surrogate_is_stored_escaped(tenant, make_job):
    """On PostgreSQL (which refuses NUL) and SQLite (where a lone surrogate cannot be encoded),
    a worker's outcome with such characters in its error, traceback, message or result is
    recorded, written out as escapes."""
    now = timezone.now()
    failed, succeeded = make_job(tenant).executions.get(), make_job(tenant).executions.get()
    for execution in (failed, succeeded):
        _queued_then_running(execution, now)

    assert transitions.fail(
        execution_id=failed.pk,
        lease_token=1,
        now=now,
        error="HttpCallError: HTTP 500: \x00\ud800",
        traceback="Traceback \x00",
    )
    assert transitions.succeed(execution_id=succeeded.pk, lease_token=1, now=now, result={"body": "\ud800\x00"})

    row = Execution.objects.get(pk=failed.pk)
    assert (row.state, row.traceback) == (S.FAILED, "Traceback \\u0000")
    assert row.error == "HttpCallError: HTTP 500: \\u0000\\ud800"
    assert row.events.get(to_state=S.FAILED).message == "HttpCallError: HTTP 500: \\u0000\\ud800"
    assert Execution.objects.get(pk=succeeded.pk).result == {"body": "\\ud800\\u0000"}
