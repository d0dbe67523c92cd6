"""pauseAfterFailures: a job's consecutive fires that end DEAD are counted in the transaction of
each move to DEAD (executions.transitions.discard, store.count_failed_fire), and the one that
reaches the job's limit pauses it by the system (jobs.transitions.auto_pause), with its reason and
an audit row; a fire that succeeds starts the count again, and so does a resume."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audit.models import ActorKind, AuditEntry
from executions import transitions
from executions.models import Execution, Run
from executions.states import ExecutionState as S
from jobs import transitions as job_transitions
from jobs.models import Job
from jobs.states import JobState
from scheduling import runs
from store import store

pytestmark = pytest.mark.django_db

STEPS = {
    "steps": [
        {"name": "a", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []},
        {"name": "b", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []},
    ]
}


def _job(make_job, tenant, **fields) -> Job:
    now = timezone.now()
    fields.setdefault("pause_after_failures", 3)
    return make_job(tenant, type="INTERVAL", every_sec=60, start_at=now - timedelta(minutes=1), now=now, **fields)


def _fire(job: Job, minutes: int) -> Execution:
    """Another scheduled fire of `job`, PENDING."""
    at = timezone.now() - timedelta(minutes=minutes)
    return transitions.create(job=job, scheduled_for=at, now=timezone.now(), wake=False)


def _fires_end(drive, job: Job, outcomes: str) -> Job:
    """One fire per letter, each driven to its end: D (DEAD) or S (SUCCEEDED)."""
    for n, outcome in enumerate(outcomes):
        drive(_fire(job, minutes=100 - n), S.DEAD if outcome == "D" else S.SUCCEEDED)
    return Job.objects.get(pk=job.pk)


def _auto_pauses(job: Job) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(job_id=job.pk, action="job.auto_pause"))


def test_the_nth_consecutive_dead_fire_pauses_the_job_by_the_system_with_its_reason(tenant, make_job, drive):
    job = _job(make_job, tenant)

    two = _fires_end(drive, job, "DD")
    three = _fires_end(drive, job, "D")

    assert (two.state, two.failed_fires, two.paused_reason) == (JobState.ACTIVE, 2, "")
    assert (three.state, three.failed_fires) == (JobState.PAUSED, 3)
    assert three.paused_reason == "paused after 3 consecutive failed fires"
    (row,) = _auto_pauses(job)
    assert (row.actor_kind, row.actor, row.outcome) == (ActorKind.SYSTEM, "tickwork", "OK")
    assert row.detail == three.paused_reason


def test_a_fire_that_succeeds_starts_the_count_again(tenant, make_job, drive):
    job = _fires_end(drive, _job(make_job, tenant), "DDSDD")

    assert (job.state, job.failed_fires) == (JobState.ACTIVE, 2)
    assert _auto_pauses(job) == []


def test_resume_clears_the_count_and_the_reason(tenant, make_job, drive):
    job = _fires_end(drive, _job(make_job, tenant, pause_after_failures=1), "D")
    assert job.state == JobState.PAUSED

    assert job_transitions.resume(job_id=job.pk, now=timezone.now())

    resumed = Job.objects.get(pk=job.pk)
    assert (resumed.state, resumed.failed_fires, resumed.paused_reason) == (JobState.ACTIVE, 0, "")
    assert _fires_end(drive, resumed, "D").state == JobState.PAUSED  # counted from zero again


def test_a_job_paused_by_someone_has_no_reason_and_is_not_paused_again(tenant, make_job, drive):
    """A fire already running when someone paused the job ends DEAD: it counts, but the job stays
    paused as that person left it, with no reason of the system's and no audit row of it."""
    job = _job(make_job, tenant, pause_after_failures=1)
    running = drive(_fire(job, minutes=5), S.RUNNING)
    assert job_transitions.pause(job_id=job.pk, now=timezone.now())

    assert transitions.fail(
        execution_id=running.pk, lease_token=running.lease_token, now=timezone.now(), error="boom", traceback=""
    )
    assert transitions.discard(execution_id=running.pk, source=S.FAILED, now=timezone.now(), message="exhausted")

    paused = Job.objects.get(pk=job.pk)
    assert (paused.state, paused.failed_fires, paused.paused_reason) == (JobState.PAUSED, 1, "")
    assert _auto_pauses(job) == []


def test_without_pause_after_failures_nothing_is_counted(tenant, make_job, drive):
    job = _fires_end(drive, _job(make_job, tenant, pause_after_failures=None), "DDDD")

    assert (job.state, job.failed_fires) == (JobState.ACTIVE, 0)


def test_a_workflow_run_that_fails_counts_once_and_one_that_succeeds_resets(tenant, make_job, drive):
    """Both steps of a run end DEAD: one failed fire. A run whose every step succeeded: the count
    starts again (a step's success alone does not)."""
    now = timezone.now()
    job = make_job(tenant, type="INTERVAL", every_sec=60, start_at=now, now=now, workflow=STEPS, pool="", handler="")
    Job.objects.filter(pk=job.pk).update(pause_after_failures=5)
    steps = {row.step: row for row in Execution.objects.filter(run__job=job)}

    drive(steps["a"], S.DEAD)
    drive(steps["b"], S.DEAD)
    assert Job.objects.get(pk=job.pk).failed_fires == 1

    runs.fire(job=job, scheduled_for=now + timedelta(minutes=1), now=now)
    later = Run.objects.get(job=job, scheduled_for=now + timedelta(minutes=1))
    made = [Execution.objects.get(run=later, step=name) for name in ("a", "b")]
    drive(made[0], S.SUCCEEDED)
    assert Job.objects.get(pk=job.pk).failed_fires == 1
    drive(made[1], S.SUCCEEDED)
    assert Job.objects.get(pk=job.pk).failed_fires == 0


@pytest.mark.django_db(transaction=True)
def test_fires_ending_dead_at_once_lose_no_count_and_pause_once(tenant, make_job, drive, monkeypatch):
    """Five workers move five fires of one job to DEAD at the same moment, each in its own
    transaction (five connections: the process's pool holds six, the test's own is one), and
    count only once all five have moved (none committed): were the count not made under the job's
    row lock, each would read the same count and all but one would be lost. The count is five, and
    of the three transactions that see it at three or more only one pauses."""
    if connection.vendor != "postgresql":
        pytest.skip("five writers at once: PostgreSQL (SQLite has one writer at a time)")
    job = _job(make_job, tenant)
    failed = [drive(_fire(job, minutes=10 + n), S.FAILED) for n in range(5)]
    all_moved = threading.Barrier(len(failed))
    count = type(store()).count_failed_fire

    def count_after_all(self, *, execution_id):
        all_moved.wait(timeout=10)
        return count(self, execution_id=execution_id)

    monkeypatch.setattr(type(store()), "count_failed_fire", count_after_all)
    errors: list[BaseException] = []

    def discard(row) -> None:
        try:
            assert transitions.discard(execution_id=row.pk, source=S.FAILED, now=timezone.now(), message="x")
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=discard, args=(row,)) for row in failed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert not errors, errors
    ended = Job.objects.get(pk=job.pk)
    assert (ended.state, ended.failed_fires) == (JobState.PAUSED, 5)
    assert len(_auto_pauses(job)) == 1
