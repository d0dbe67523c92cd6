"""The job's named transitions: each declares the moves it makes against the job's table
(jobs/states.py), owns the fields it writes, and is one conditional UPDATE. Zero rows is an
answer (the job was not in a source state: someone moved it first, or the move is not allowed
from where it is); every caller handles it. The services that ask for them, with what goes with
each (a version check, the job's executions), are scheduling/job_changes.py's.

A one-off job's COMPLETED is no move of these: it is read from its executions
(executions/standing.py), so the end of its run writes nothing of the job.
"""

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db.models import Case, DateTimeField, F, Value, When

from jobs.models import Job
from jobs.states import JOB
from jobs.states import StoredJobState as JobState


def _move(name: str, job_id: Any, now: datetime, **values: Any) -> bool:
    """The named transition `name` of one job: its sources and target as it declared them."""
    sources, target = JOB.sources(name), JOB.target(name)
    return Job.objects.filter(pk=job_id, state__in=sources).update(state=target, updated_at=now, **values) == 1


@JOB.transition([JobState.ACTIVE], JobState.PAUSED)
def pause(*, job_id: Any, now: datetime) -> bool:
    """ACTIVE → PAUSED: nothing of it is claimed until it is resumed."""
    return _move("pause", job_id, now)


# Who hears, inside the transaction, that the system paused a job (`auto_pause`): the audit log
# subscribes (audit/apps.py), so that its row commits with the pause or not at all. A listener
# takes (job_id, now, reason) and may write; it must not swallow an error.
AutoPauseListener = Callable[[Any, datetime, str], None]
_auto_pause_listeners: list[AutoPauseListener] = []


def on_auto_pause(listener: AutoPauseListener) -> None:
    if listener not in _auto_pause_listeners:
        _auto_pause_listeners.append(listener)


@JOB.transition([JobState.ACTIVE], JobState.PAUSED)
def auto_pause(*, job_id: Any, now: datetime) -> str | None:
    """ACTIVE → PAUSED by the system: the job's consecutive failed fires (`failed_fires`, counted
    by the store in the transaction that moved the last one to DEAD) reached its
    `pause_after_failures`. One conditional UPDATE, so of several transactions that see the count
    reach it only the first pauses. Returns the reason it recorded, or None when it did not pause
    (not ACTIVE, not set, or not reached). Call in the transaction of the move to DEAD."""
    job = Job.objects.filter(pk=job_id).values("pause_after_failures", "failed_fires").first()
    if job is None or job["pause_after_failures"] is None:
        return None
    count = job["failed_fires"]
    reason = f"paused after {count} consecutive failed fire{'s' if count != 1 else ''}"
    moved = (
        Job.objects.filter(
            pk=job_id,
            state__in=JOB.sources("auto_pause"),
            pause_after_failures__isnull=False,
            failed_fires__gte=F("pause_after_failures"),
        ).update(state=JOB.target("auto_pause"), paused_reason=reason, updated_at=now)
        == 1
    )
    if not moved:
        return None
    for listener in _auto_pause_listeners:
        listener(job_id, now, reason)
    return reason


@JOB.transition([JobState.PAUSED], JobState.ACTIVE)
def resume(*, job_id: Any, now: datetime) -> bool:
    """PAUSED → ACTIVE, its count of failed fires and the system's reason for the pause cleared."""
    return _move("resume", job_id, now, failed_fires=0, paused_reason="")


def failed_fires_reset(*, job_ids: Iterable[Any]) -> int:
    """A fire of each of these jobs succeeded (no change of state): their counts of consecutive
    failed fires start again. Writes only the rows that counted some."""
    return Job.objects.filter(pk__in=list(job_ids), failed_fires__gt=0).update(failed_fires=0)


@JOB.transition([JobState.ACTIVE, JobState.PAUSED], JobState.CANCELLED)
def cancel(*, job_id: Any, now: datetime) -> bool:
    """ACTIVE or PAUSED → CANCELLED: no future fires."""
    return _move("cancel", job_id, now, next_fire_at=None, paused_reason="")


def jobs_advance(*, next_fires: Mapping[Any, datetime]) -> int:
    """Record many jobs' next fires in one statement (no change of state): one CASE branch per
    distinct time, so a herd of jobs that fire together is one branch.

    updated_at stays: it is when the job's definition or state last changed (a cancelled job's is
    when it was cancelled, which the pruning's index reads), not its every fire. Writing it made
    each fire's update of the row rewrite every index of the table (job_ended indexes it), where now
    PostgreSQL keeps the new version on the row's page (HOT: jobs 0008)."""
    if not next_fires:
        return 0
    by_fire: dict[datetime, list] = defaultdict(list)
    for job_id, fire in next_fires.items():
        by_fire[fire].append(job_id)
    branches = [When(pk__in=ids, then=Value(fire)) for fire, ids in by_fire.items()]
    return Job.objects.filter(pk__in=list(next_fires)).update(
        next_fire_at=Case(*branches, output_field=DateTimeField())
    )
