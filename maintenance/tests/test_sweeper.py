"""The sweeper's services (maintenance/registry.py), one pass with the in-memory publisher and an injected
`now`: lost leases, timeouts, forced cancels, lost publishes and retention."""

from datetime import timedelta

import pytest
from django.test import TestCase
from django.utils import timezone

from background.publisher import InMemoryPublisher
from background.service import Pass
from executions import logs
from executions.models import Execution, ExecutionLog
from jobs.models import Job
from scheduling.execution_changes import execution_cancel
from testing.harness import history
from testing.steps import claim, start, succeed, sweeper_pass

pytestmark = pytest.mark.django_db
LEASE = 30
GRACE = 10


@pytest.fixture(autouse=True)
def timings(settings):
    settings.TICKWORK_LEASE_SECONDS = LEASE
    settings.TICKWORK_CANCEL_GRACE_SECONDS = GRACE
    settings.TICKWORK_PUBLISH_GRACE_SECONDS = 30


def sweep(now) -> tuple[Pass, list]:
    publisher = InMemoryPublisher()
    with TestCase.captureOnCommitCallbacks(execute=True):
        result = sweeper_pass(now, publisher=publisher)
    return result, publisher.sent


def _running(make_job, tenant, now, **fields):
    """An execution started at `now` under a 30 s lease, with a FIXED 5 s retry policy."""
    fields = {"max_attempts": 3, "backoff": "FIXED", "initial_delay_ms": 5000, "jitter": False, **fields}
    job = make_job(tenant, run_at=now - timedelta(seconds=1), **fields)
    (sent,) = claim(now)
    return job, start(sent.execution_id, now=now, lease=LEASE)


def test_an_expired_lease_is_reclaimed_as_worker_lost_and_retried_after_the_backoff(tenant, make_job, now):
    """RUNNING whose lease expired (no heartbeat) → FAILED_WORKER_LOST → PENDING as attempt 2,
    available after the retry policy's delay. A live lease is left alone."""
    _job, execution = _running(make_job, tenant, now)

    assert sweep(now + timedelta(seconds=LEASE - 1))[0].work() == 0
    later = now + timedelta(seconds=LEASE + 1)
    result, _ = sweep(later)

    assert result["lost_leases"].lost == 1
    execution.refresh_from_db()
    assert execution.state == "PENDING" and execution.attempt == 2
    assert execution.available_at == later + timedelta(seconds=5)
    assert execution.lease_expires_at is None
    assert history(execution.pk)[-2:] == [("RUNNING", "FAILED_WORKER_LOST"), ("FAILED_WORKER_LOST", "PENDING")]
    # The retry is claimed under a new lease token: the lost worker's writes are fenced off.
    (retry,) = claim(execution.available_at)
    assert retry.lease_token == 2


def test_a_lost_last_attempt_is_dead_and_completes_its_one_off_job(tenant, make_job, now):
    """With no attempts left, a lost worker's execution goes DEAD (and the ONCE job COMPLETED)."""
    job, execution = _running(make_job, tenant, now, max_attempts=1)

    sweep(now + timedelta(seconds=LEASE + 1))

    execution.refresh_from_db()
    assert execution.state == "DEAD"
    assert history(execution.pk)[-1] == ("FAILED_WORKER_LOST", "DEAD")
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"


def test_a_run_past_its_timeout_and_grace_is_timed_out_by_the_sweeper(tenant, make_job, now):
    """The worker's heartbeat stops an overdue run itself; if it has not within the grace (the
    handler would not stop, the heartbeat kept the lease), the sweeper records TIMED_OUT and the
    retry policy applies."""
    _job, execution = _running(make_job, tenant, now, timeout_sec=60)

    still_heartbeating = {"lease_expires_at": now + timedelta(hours=1)}
    Execution.objects.filter(pk=execution.pk).update(**still_heartbeating)
    assert sweep(now + timedelta(seconds=60 + GRACE - 1))[0]["timeouts"].timed_out == 0
    result, _ = sweep(now + timedelta(seconds=60 + GRACE + 1))

    assert result["timeouts"].timed_out == 1
    execution.refresh_from_db()
    assert execution.state == "PENDING" and execution.attempt == 2
    assert history(execution.pk)[-2:] == [("RUNNING", "TIMED_OUT"), ("TIMED_OUT", "PENDING")]


def test_a_cancel_the_worker_did_not_carry_out_is_enforced_after_two_graces(tenant, make_job, now):
    """A cancel request on a RUNNING execution is the worker's to carry out; two graces later the
    sweeper records CANCELLED itself."""
    job, execution = _running(make_job, tenant, now)
    Execution.objects.filter(pk=execution.pk).update(lease_expires_at=now + timedelta(hours=1))
    assert execution_cancel(execution=execution, now=now) == "RUNNING"

    assert sweep(now + timedelta(seconds=2 * GRACE - 1))[0]["forced_cancels"].force_cancelled == 0
    result, _ = sweep(now + timedelta(seconds=2 * GRACE + 1))

    assert result["forced_cancels"].force_cancelled == 1
    assert Execution.objects.get(pk=execution.pk).state == "CANCELLED"
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"


def test_a_cancelled_run_whose_worker_is_lost_is_cancelled_not_retried(tenant, make_job, now):
    """The worker died after a cancel was requested: when its lease expires the execution is
    CANCELLED — what was asked to stop is not run again as a retry."""
    _job, execution = _running(make_job, tenant, now)
    execution_cancel(execution=execution, now=now + timedelta(seconds=1))

    result, _ = sweep(now + timedelta(seconds=LEASE + 1))

    assert (result["lost_leases"].lost, result["forced_cancels"].force_cancelled) == (0, 1)
    execution.refresh_from_db()
    assert execution.state == "CANCELLED" and execution.attempt == 1
    assert history(execution.pk)[-1] == ("RUNNING", "CANCELLED")


def test_a_queued_execution_nobody_started_is_published_again_with_a_growing_grace(tenant, make_job, now):
    """QUEUED past its republish deadline (the publish was lost, or the queue is slow) is
    published again under the same lease token, and the next deadline is further away each time,
    so a backlogged pool is not flooded with copies."""
    make_job(tenant, run_at=now - timedelta(seconds=1))
    (first,) = claim(now)
    execution = Execution.objects.get(pk=first.execution_id)
    assert execution.republish_at == now + timedelta(seconds=30)

    assert sweep(now + timedelta(seconds=29))[1] == []
    at = now + timedelta(seconds=31)
    result, sent = sweep(at)

    assert result["republishing"].republished == 1 and sent == [first]
    execution.refresh_from_db()
    assert execution.state == "QUEUED" and execution.publish_count == 2
    assert execution.republish_at == at + timedelta(seconds=60)  # the grace doubled: 30 s, 60 s, 120 s…
    assert history(execution.pk)[-1] == ("QUEUED", "QUEUED")
    assert sweep(at + timedelta(seconds=59))[1] == []
    again = at + timedelta(seconds=61)
    assert sweep(again)[1] == [first]
    assert Execution.objects.get(pk=execution.pk).republish_at == again + timedelta(seconds=120)


def test_finished_executions_are_pruned_after_the_retention_period(settings, tenant, make_job, now):
    """Terminal executions older than TICKWORK_RETENTION_DAYS are deleted with their events;
    newer ones and unfinished ones stay."""
    settings.TICKWORK_RETENTION_DAYS = 30
    _job, execution = _running(make_job, tenant, now)
    succeed(execution.pk, now=now)
    pending = Execution.objects.get(job=make_job(tenant, run_at=now + timedelta(days=60)))

    assert sweep(now + timedelta(days=29))[0]["retention"].pruned == 0
    result, _ = sweep(now + timedelta(days=31))

    assert result["retention"].pruned == 1
    assert not Execution.objects.filter(pk=execution.pk).exists()
    assert Execution.objects.filter(pk=pending.pk).exists()


def test_an_executions_log_lines_go_with_it_when_it_is_pruned(settings, tenant, make_job, now):
    """What a handler logged is deleted with its execution (a cascade), and no other's lines."""
    settings.TICKWORK_RETENTION_DAYS = 30
    _job, execution = _running(make_job, tenant, now)
    succeed(execution.pk, now=now)
    pending = Execution.objects.get(job=make_job(tenant, run_at=now + timedelta(days=60)))
    for owner in (execution, pending):
        logs.log_lines_write(
            execution_id=owner.pk, attempt=1, lines=[logs.Line(seq=1, at=now, level="INFO", logger="h", message="m")]
        )

    assert sweep(now + timedelta(days=31))[0]["retention"].pruned == 1

    assert list(ExecutionLog.objects.values_list("execution_id", flat=True)) == [pending.pk]


def test_an_ended_job_goes_once_its_executions_are_pruned_and_a_live_one_stays(settings, tenant, make_job, now):
    """A one-off job that COMPLETED is deleted (with its versions) once its last execution is
    pruned, so the jobs table holds steady at a constant daily volume; a job with an execution
    left, and a cron job still ACTIVE, stay."""
    from jobs.models import Job, JobVersion
    from scheduling.job_changes import job_update

    settings.TICKWORK_RETENTION_DAYS = 30
    done, execution = _running(make_job, tenant, now)
    job_update(job=done, fields={"name": "renamed"}, now=now)  # versions 1 and 2 stored
    assert JobVersion.objects.filter(job_id=done.pk).count() == 2
    succeed(execution.pk, now=now)
    Job.objects.filter(pk=done.pk).update(updated_at=now)  # it ended then
    assert Job.objects.get(pk=done.pk).standing == "COMPLETED"
    waiting = make_job(tenant, run_at=now + timedelta(days=60))
    cron = make_job(tenant, type="CRON", schedule="0 0 1 1 *")

    assert sweep(now + timedelta(days=29))[0]["retention"].jobs_pruned == 0
    first, _ = sweep(now + timedelta(days=31))  # the execution goes, then the job left with none

    assert first["retention"].pruned == 1 and first["retention"].jobs_pruned == 1
    assert not Job.objects.filter(pk=done.pk).exists()
    assert not JobVersion.objects.filter(job_id=done.pk).exists()
    assert set(Job.objects.values_list("pk", flat=True)) == {waiting.pk, cron.pk}


def test_a_one_off_goes_with_its_last_execution_not_with_an_earlier_one(settings, tenant, make_job, drive, now):
    """A one-off's COMPLETED is read, not written: retention finds it by its executions as they
    are pruned, in their transaction. Triggered again, it stays while a run of it is left."""
    from jobs.models import Job
    from scheduling.job_changes import job_trigger

    settings.TICKWORK_RETENTION_DAYS = 30
    job = make_job(tenant, run_at=now)
    drive(job.executions.get(), "SUCCEEDED")
    later = job_trigger(job=job, now=now)
    drive(later, "SUCCEEDED")
    Execution.objects.filter(pk=later.pk).update(finished_at=now + timedelta(days=5))

    first, _ = sweep(now + timedelta(days=31))  # the first run goes; the job has the second
    assert (first["retention"].pruned, first["retention"].jobs_pruned) == (1, 0)
    assert Job.objects.get(pk=job.pk).standing == "COMPLETED"

    second, _ = sweep(now + timedelta(days=36))
    assert (second["retention"].pruned, second["retention"].jobs_pruned) == (1, 1)
    assert not Job.objects.filter(pk=job.pk).exists()


def test_a_cron_workflows_finished_runs_go_with_their_executions_and_its_live_run_stays(
    settings, tenant, make_job, now
):
    """A workflow run whose steps were all pruned is deleted too; the run still to come stays."""
    from executions.models import Run
    from scheduling import runs

    settings.TICKWORK_RETENTION_DAYS = 30
    steps = [{"name": "only", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []}]
    job = make_job(tenant, type="CRON", schedule="0 0 1 1 *", workflow={"steps": steps}, pool="", handler="")
    coming = Run.objects.get(job=job)
    old = runs.fire(job=job, scheduled_for=now, now=now, origin="TRIGGER")
    runs.cancel_run(run_id=old.run_id, now=now, reason="test")

    result, _ = sweep(now + timedelta(days=31))

    assert result["retention"].pruned == 1 and result["retention"].runs_pruned == 1
    assert list(Run.objects.values_list("pk", flat=True)) == [coming.pk]


def test_nothing_to_do_is_a_zero_result(tenant, make_job):
    """An idle sweep returns zero counts (and so logs nothing)."""
    make_job(tenant, run_at=timezone.now() + timedelta(hours=1))
    assert sweep(timezone.now())[0].work() == 0
