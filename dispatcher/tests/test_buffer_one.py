"""concurrencyPolicy BUFFER_ONE through the dispatcher, time injected: a fire claimed while a run
of the job is in progress waits (BLOCKED, unpublished); a fire claimed while one waits is skipped
with a reason naming BUFFER_ONE; the waiting fire starts at the first pass after the run ends,
however it ends (success, DEAD, cancelled), without waiting for another fire. For plain jobs and
for workflow runs as wholes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from dispatcher.dispatcher import release_buffered
from executions import transitions
from executions.models import Execution, ExecutionEvent, Run
from jobs import overlap
from testing.steps import claim, dispatch, start, succeed

pytestmark = pytest.mark.django_db


def _end(how: str, execution_id, now) -> None:
    token = Execution.objects.get(pk=execution_id).lease_token
    if how == "success":
        succeed(execution_id, now=now)
    elif how == "dead":
        assert transitions.fail(execution_id=execution_id, lease_token=token, now=now, error="boom", traceback="")
        assert transitions.discard(execution_id=execution_id, source="FAILED", now=now, message="no attempts left")
    else:
        assert transitions.cancel_running(execution_id=execution_id, lease_token=token, now=now, reason="stop")


def _messages(execution) -> list[str]:
    return list(ExecutionEvent.objects.filter(execution=execution).order_by("id").values_list("message", flat=True))


@pytest.mark.parametrize("how", ["success", "dead", "cancelled"])
def test_one_fire_waits_a_second_is_skipped_and_the_waiting_one_starts_when_the_run_ends(tenant, make_job, how):
    now = timezone.now().replace(second=0, microsecond=0)
    job = make_job(tenant, type="CRON", schedule="*/5 * * * *", concurrency_policy="BUFFER_ONE", now=now)
    fire1 = job.next_fire_at
    fire2, fire3 = fire1 + timedelta(minutes=5), fire1 + timedelta(minutes=10)
    (first,) = claim(fire1)
    start(first.execution_id, now=fire1)

    assert claim(fire2) == []  # run 1 in progress: fire 2 waits, unpublished
    waiting = Execution.objects.get(job=job, scheduled_for=fire2)
    assert waiting.state == "BLOCKED" and _messages(waiting)[-1] == overlap.BUFFERED_REASON
    assert claim(fire2 + timedelta(seconds=30)) == []  # still in progress: it stays waiting

    assert claim(fire3) == []  # one waits already: fire 3 is skipped
    dropped = Execution.objects.get(job=job, scheduled_for=fire3)
    assert dropped.state == "CANCELLED" and "BUFFER_ONE" in _messages(dropped)[-1]
    assert Execution.objects.filter(job=job, scheduled_for=fire1 + timedelta(minutes=15), state="PENDING").exists()

    ended = fire3 + timedelta(seconds=20)
    _end(how, first.execution_id, ended)
    (released,) = claim(ended + timedelta(seconds=1))  # the next pass: no other fire is due then
    assert released.execution_id == str(waiting.pk)
    waiting.refresh_from_db()
    assert waiting.state == "QUEUED" and waiting.attempt == 1
    # Released, not judged again as a late fire; and no second successor made for it.
    assert Execution.objects.filter(job=job, state="PENDING").count() == 1


def test_a_retry_waiting_for_its_backoff_is_a_run_in_progress(tenant, make_job):
    now = timezone.now().replace(second=0, microsecond=0)
    job = make_job(tenant, type="CRON", schedule="*/5 * * * *", concurrency_policy="BUFFER_ONE", now=now)
    fire1 = job.next_fire_at
    (first,) = claim(fire1)
    start(first.execution_id, now=fire1)
    token = Execution.objects.get(pk=first.execution_id).lease_token
    assert transitions.fail(execution_id=first.execution_id, lease_token=token, now=fire1, error="e", traceback="")
    later = fire1 + timedelta(minutes=20)
    assert transitions.retry(
        execution_id=first.execution_id, source="FAILED", now=fire1, available_at=later, message="retry"
    )

    assert claim(fire1 + timedelta(minutes=5)) == []  # the retry waits for its backoff: fire 2 waits for it
    assert Execution.objects.get(job=job, scheduled_for=fire1 + timedelta(minutes=5)).state == "BLOCKED"
    (retried,) = claim(later)  # the retry comes due and runs; fire 2 goes on waiting
    assert retried.execution_id == first.execution_id
    assert Execution.objects.get(job=job, scheduled_for=fire1 + timedelta(minutes=5)).state == "BLOCKED"


def test_a_trigger_runs_beside_and_the_schedule_still_buffers_behind_it(tenant, make_job):
    """As under FORBID, the policy is the schedule's: "run now" runs; a scheduled fire then waits."""
    from scheduling.job_changes import job_trigger

    now = timezone.now().replace(second=0, microsecond=0)
    job = make_job(tenant, type="CRON", schedule="*/5 * * * *", concurrency_policy="BUFFER_ONE", now=now)
    fire1 = job.next_fire_at
    triggered = job_trigger(job=job, now=fire1 - timedelta(minutes=1))
    assert len(claim(fire1 - timedelta(minutes=1))) == 1
    start(triggered.pk, now=fire1 - timedelta(minutes=1))
    assert claim(fire1) == []
    assert Execution.objects.get(job=job, scheduled_for=fire1, origin="SCHEDULE").state == "BLOCKED"


def test_a_policy_changed_away_from_buffer_one_still_releases_the_waiting_fire(tenant, make_job):
    now = timezone.now().replace(second=0, microsecond=0)
    job = make_job(tenant, type="CRON", schedule="*/5 * * * *", concurrency_policy="BUFFER_ONE", now=now)
    fire1 = job.next_fire_at
    (first,) = claim(fire1)
    start(first.execution_id, now=fire1)
    claim(fire1 + timedelta(minutes=5))
    type(job).objects.filter(pk=job.pk).update(concurrency_policy="ALLOW")
    succeed(first.execution_id, now=fire1 + timedelta(minutes=6))
    result, sent = dispatch(fire1 + timedelta(minutes=6))
    assert result.released == 1 and len(sent) == 1


# --- workflow jobs: the run as a whole ------------------------------------------------------------

STEPS = [
    {"name": "first", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []},
    {"name": "second", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["first"]},
]


def _states(job, fire) -> dict[str, str]:
    run = Run.objects.get(job=job, scheduled_for=fire)
    return dict(Execution.objects.filter(run=run).values_list("step", "state"))


@pytest.mark.parametrize("how", ["success", "dead", "cancelled"])
def test_a_workflow_run_waits_whole_and_starts_when_the_run_in_progress_ends(tenant, make_job, how):
    now = timezone.now().replace(second=0, microsecond=0)
    job = make_job(
        tenant,
        type="CRON",
        schedule="*/5 * * * *",
        workflow={"steps": STEPS},
        pool="",
        handler="",
        concurrency_policy="BUFFER_ONE",
        now=now,
    )
    fire1 = job.next_fire_at
    fire2, fire3 = fire1 + timedelta(minutes=5), fire1 + timedelta(minutes=10)
    (first,) = claim(fire1)
    start(first.execution_id, now=fire1)

    assert claim(fire2) == []
    assert _states(job, fire2) == {"first": "BLOCKED", "second": "BLOCKED"}
    assert claim(fire3) == []
    assert _states(job, fire3) == {"first": "CANCELLED", "second": "CANCELLED"}
    skipped = ExecutionEvent.objects.filter(execution__run__scheduled_for=fire3, execution__run__job=job)
    assert {e.message for e in skipped if e.to_state == "CANCELLED"} == {overlap.SKIPPED_REASON}

    ended = fire3 + timedelta(seconds=10)
    if how == "success":  # run 1 goes on to its second step: still in progress, run 2 waits
        succeed(first.execution_id, now=ended)
        (second,) = claim(ended)
        assert _states(job, fire2) == {"first": "BLOCKED", "second": "BLOCKED"}
        start(second.execution_id, now=ended)
        succeed(second.execution_id, now=ended)
    else:
        _end(how, first.execution_id, ended)
    (released,) = claim(ended + timedelta(seconds=1))
    assert _states(job, fire2) == {"first": "QUEUED", "second": "BLOCKED"}
    assert released.execution_id == str(Execution.objects.get(run__job=job, run__scheduled_for=fire2, step="first").pk)
    assert Run.objects.filter(job=job, scheduled_for=fire1 + timedelta(minutes=15)).count() == 1


def test_a_pass_with_nothing_blocked_asks_one_question(tenant, make_job, django_assert_num_queries):
    """Most passes have no fire or run waiting: the release is then one probe, not its joins
    (which were half a dispatcher's CPU per job at 500 jobs/s, bench/README.md)."""
    make_job(tenant, type="CRON", schedule="*/5 * * * *", concurrency_policy="BUFFER_ONE")

    with django_assert_num_queries(1):
        assert release_buffered(now=timezone.now()) == 0
