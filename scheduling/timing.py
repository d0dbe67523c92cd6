"""A job's timing from the moment it is made or changed: when its schedule first fires, a DELAYED
job's instant, an INTERVAL job's start. Creation and a change of timing read it alike."""

from datetime import datetime, timedelta

from jobs import recurrence
from jobs.models import Job, JobType


def first_fire(*, job: Job, now: datetime) -> datetime | None:
    """When a job's schedule first fires (a DELAYED job's run_at is set from its delay first);
    None for an EVENT job, which no time fires. The API has refused a job without one: a one-off
    with no time, a schedule that never fires. A schedule's hashed (H) values are resolved with
    the job's id, so they hold for its life. A recurring job fires first at its `start_at` when
    that is ahead (jobs/recurrence.py)."""
    if job.type == JobType.EVENT:
        return None
    fire: datetime | None = job.run_at
    if (schedule := recurrence.of_job(job)) is not None:
        fire = recurrence.first_fire(schedule, now=now, start=job.start_at)
    if fire is None:
        raise ValueError(f"job {job.pk} ({job.type}) has no first fire")
    return fire


def complete_timing(job: Job, now: datetime) -> None:
    """What a job's timing takes from the moment it is made: a new DELAYED job's instant, and an
    INTERVAL job's first fire when no `start_at` was given (a job changed to INTERVAL likewise)."""
    if job.type == JobType.DELAYED and job._state.adding:
        job.run_at = delayed_run_at(job, now)
    if job.type == JobType.INTERVAL and job.start_at is None:
        job.start_at = now


def delayed_run_at(job: Job, now: datetime) -> datetime:
    if job.delay_sec is None:
        raise ValueError(f"DELAYED job {job.pk} has no delay")
    return now + timedelta(seconds=job.delay_sec)
