"""Changes asked of a job: its definition (update, which re-times its pending run), its state
(pause, resume, cancel with its unstarted runs) and a run now (trigger). Each is one transaction,
and a change asked of a version (If-Match) is made only at that version, under the job's row lock."""

from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db import transaction

from executions import retiming
from executions.models import Execution, Origin, Run
from executions.states import ExecutionState
from jobs import transitions as job_transitions
from jobs.models import Job, JobType
from jobs.states import ENDED as JOB_ENDED
from jobs.states import InvalidJobTransition, JobState
from jobs.versions import version_number, version_one, versions_record
from scheduling import runs
from scheduling.execution_changes import execution_cancel
from scheduling.timing import complete_timing, delayed_run_at, first_fire
from store import store


class StaleVersion(Exception):
    """A change was asked of a job at a version (an If-Match) that it is no longer at."""

    def __init__(self, job_id: Any, current: int, expected: Collection[int]) -> None:
        asked = " or ".join(str(number) for number in sorted(expected))
        said = f"the change was asked of version {asked}" if asked else "the change named none of its versions"
        super().__init__(f"job {job_id} is at version {current}; {said}")
        self.current = current


def execution_create(*, job: Job, scheduled_for: datetime, now: datetime, origin: str = Origin.SCHEDULE) -> Execution:
    """A run of `job` due at `scheduled_for` (scheduling/runs.py): its execution, or for a
    workflow job its first step's. Each with its first event."""
    return runs.fire(job=job, scheduled_for=scheduled_for, now=now, origin=origin).executions[0]


# Fields whose change moves the pending fire of the schedule.
_TIMING_FIELDS = {"type", "run_at", "delay_sec", "schedule", "timezone", "every_sec", "start_at"}


def _check_version(job: Job, versions: Collection[int] | None) -> None:
    """Refuse (StaleVersion) unless the job is at one of `versions` (None: at any). The caller
    holds the job's row lock, which every change of its definition takes (job_update): of two
    writers asking for the same version, the second reads the first one's version once it has
    committed, and is refused."""
    if versions is None:
        return
    current = version_number(job=job)
    if current not in versions:
        raise StaleVersion(job.pk, current, versions)


def _lock_at_version(job: Job, versions: Collection[int] | None) -> None:
    """For a state change asked of a version: the job's row lock, and the version checked under it."""
    if versions is not None:
        Job.objects.select_for_update().filter(pk=job.pk).values_list("pk", flat=True).first()
        _check_version(job, versions)


@transaction.atomic
def job_update(
    *, job: Job, fields: dict[str, Any], now: datetime, actor: str = "", if_version: Collection[int] | None = None
) -> Job:
    """Change a job's definition. A change of timing re-times its pending scheduled fire; a
    change of pool or priority applies to executions not yet claimed. A change of the definition
    records its next version (jobs.versions), made by `actor`, in the same transaction; an
    update that changes nothing records none. With `if_version`, only a job at one of those
    versions is changed (StaleVersion otherwise), checked under the job's row lock."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    _check_version(job, if_version)
    if job.standing in JOB_ENDED:
        # Nothing of a finished job will run again, so a new time would promise a phantom fire.
        raise InvalidJobTransition(job.id, job.standing, "updated")
    before = {job.pk: version_one(job)}  # its version 1, should the row still be the only one that holds it
    for name, value in fields.items():
        setattr(job, name, value)
    waiting = _waiting_run(job)
    if _TIMING_FIELDS & fields.keys():
        if job.type == JobType.DELAYED and "delay_sec" in fields:
            job.run_at = delayed_run_at(job, now)
        complete_timing(job, now)
        fire = first_fire(job=job, now=now)
        job.next_fire_at = fire
        moved = retiming.retime_scheduled(job_id=job.pk, fire=fire, now=now)
        if waiting is not None and fire is not None:
            retiming.retime_run(run_id=waiting.pk, fire=fire, now=now)
        if moved or waiting is not None:
            store().notify_due(fire or now)
    if "workflow" in fields and waiting is not None:
        # The scheduled run that has not begun takes the new steps: it is made again, at its time.
        scheduled_for = Run.objects.get(pk=waiting.pk).scheduled_for
        # Its executions go with it: first attempts that have not run count nothing (tallies.py).
        waiting.delete()
        runs.fire(job=job, scheduled_for=scheduled_for, now=now)
    job.save()
    # Under the row lock taken above: concurrent updates of the job number their versions in turn.
    versions_record(jobs=[job], actor=actor, now=now, before=before)
    if {"pool", "priority"} & fields.keys():
        retiming.repool_pending(job_id=job.pk, pool=job.pool, priority=job.priority, now=now)
    return job


def _waiting_run(job: Job) -> Run | None:
    """The workflow job's scheduled run that has not begun: not admitted by a dispatcher, and
    none of its steps past PENDING or BLOCKED at its first attempt. None for a plain job."""
    if not job.workflow:
        return None
    for run in Run.objects.filter(job=job, origin=Origin.SCHEDULE, admitted=False):
        started = run.executions.exclude(state__in=[ExecutionState.PENDING, ExecutionState.BLOCKED], attempt=1)
        if not started.exists():
            return run
    return None


@transaction.atomic
def job_pause(*, job: Job, now: datetime, if_version: Collection[int] | None = None) -> Job:
    """No execution of a paused job is claimed; the pending one waits for `resume`. With
    `if_version`, as job_update's."""
    _lock_at_version(job, if_version)
    if _ended(job) or not job_transitions.pause(job_id=job.pk, now=now):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.PAUSED)
    return Job.objects.get(pk=job.pk)


@transaction.atomic
def job_resume(*, job: Job, now: datetime, if_version: Collection[int] | None = None) -> Job:
    """A resumed cron job whose pending fire is long past runs it per its misfire policy. With
    `if_version`, as job_update's."""
    _lock_at_version(job, if_version)
    if not job_transitions.resume(job_id=job.pk, now=now):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.ACTIVE)
    store().notify_due(now)
    return Job.objects.get(pk=job.pk)


@transaction.atomic
def job_cancel(*, job: Job, now: datetime, if_version: Collection[int] | None = None) -> Job:
    """No future fires: the job is CANCELLED, and so is every execution of it not yet started
    (pending or queued). Runs already started finish (cancel them one by one to stop them). With
    `if_version`, as job_update's."""
    _lock_at_version(job, if_version)
    if _ended(job) or not job_transitions.cancel(job_id=job.pk, now=now):
        raise InvalidJobTransition(job.pk, _state_of(job), JobState.CANCELLED)
    unstarted_states = [ExecutionState.PENDING, ExecutionState.QUEUED]
    unstarted = Execution.objects.filter(job_id=job.pk, state__in=unstarted_states)
    waiting = Execution.objects.filter(job_id=job.pk, state__in=[ExecutionState.BLOCKED, *unstarted_states])
    for run_id in set(waiting.filter(run__isnull=False).values_list("run_id", flat=True)):
        # A run's steps together, BLOCKED ones too; not one by one, which would cancel the steps
        # below the first as its downstream steps.
        runs.cancel_run(run_id=run_id, now=now, reason="job cancelled", running=False)
    for execution in unstarted.filter(run__isnull=True):
        execution_cancel(execution=execution, now=now, reason="job cancelled")
    return Job.objects.get(pk=job.pk)


@transaction.atomic
def job_trigger(*, job: Job, now: datetime) -> Execution:
    """Run now, outside the schedule: a new execution due immediately (a COMPLETED one-off job
    reads ACTIVE again while it can run: executions/standing.py)."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.state == JobState.PAUSED:
        raise InvalidJobTransition(job.pk, job.state, "triggered", "the job is paused; resume it first")
    elif job.state != JobState.ACTIVE:
        raise InvalidJobTransition(job.pk, job.state, "triggered", f"the job is {job.state.lower()}; it runs no more")
    return execution_create(job=job, scheduled_for=now, now=now, origin=Origin.TRIGGER)


def _ended(job: Job) -> bool:
    """A one-off job none of whose executions can run: it reads COMPLETED (executions/standing.py),
    and neither pauses nor cancels. Read under the job's row lock; a run that ends as it is read
    leaves a paused or cancelled job whose run has ended, as when the end came just after."""
    if not job.is_one_off:
        return False
    fresh = Job.objects.filter(pk=job.pk).first()
    return fresh is not None and fresh.standing == JobState.COMPLETED


def _state_of(job: Job) -> str:
    fresh = Job.objects.filter(pk=job.pk).first()
    return fresh.standing if fresh is not None else job.state
