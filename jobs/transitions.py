"""The job's named transitions: each owns the fields it writes and the source states it accepts,
and is one conditional UPDATE. Zero rows is an answer (the job was not in a source state: someone
moved it first, or the move is not allowed from where it is); every caller handles it.

Settling (ACTIVE → COMPLETED) happens inside the execution move that ends a one-off job's last
run (store/), so that no run ends without its job being settled in the same
transaction; `jobs_complete` is that move, and PostgreSQL's store writes it as a step of the
execution's statement.
"""

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db.models import Case, DateTimeField, Value, When

from jobs.models import ONE_OFF_TYPES, Job
from jobs.states import TRANSITIONS, JobState


def _move(job_id: Any, sources: Iterable[JobState], target: JobState, now: datetime, **values: Any) -> bool:
    sources = list(sources)
    assert all(target in TRANSITIONS[source] for source in sources), (sources, target)
    return Job.objects.filter(pk=job_id, state__in=sources).update(state=target, updated_at=now, **values) == 1


def job_pause(*, job_id: Any, now: datetime) -> bool:
    """ACTIVE → PAUSED: nothing of it is claimed until it is resumed."""
    return _move(job_id, [JobState.ACTIVE], JobState.PAUSED, now)


def job_resume(*, job_id: Any, now: datetime) -> bool:
    """PAUSED → ACTIVE."""
    return _move(job_id, [JobState.PAUSED], JobState.ACTIVE, now)


def job_cancel(*, job_id: Any, now: datetime) -> bool:
    """ACTIVE or PAUSED → CANCELLED: no future fires."""
    return _move(job_id, [JobState.ACTIVE, JobState.PAUSED], JobState.CANCELLED, now, next_fire_at=None)


def job_reopen(*, job_id: Any, now: datetime) -> bool:
    """COMPLETED → ACTIVE: a completed one-off job runs again (triggered, or a run re-driven)."""
    return _move(job_id, [JobState.COMPLETED], JobState.ACTIVE, now)


def jobs_complete(*, job_ids: list, now: datetime, open_states: Iterable[str]) -> int:
    """ACTIVE → COMPLETED for each one-off job among `job_ids` none of whose executions is in one
    of `open_states` (can still run). Returns how many moved."""
    assert JobState.COMPLETED in TRANSITIONS[JobState.ACTIVE]
    return (
        Job.objects.filter(pk__in=job_ids, state=JobState.ACTIVE, type__in=ONE_OFF_TYPES)
        .exclude(executions__state__in=list(open_states))
        .update(state=JobState.COMPLETED, next_fire_at=None, updated_at=now)
    )


def jobs_advance(*, next_fires: Mapping[Any, datetime]) -> int:
    """Record many jobs' next fires in one statement (no change of state): one CASE branch per
    distinct time, so a herd of jobs that fire together is one branch.

    updated_at stays: it is when the job's definition or state last changed (an ended job's is
    when it ended, which the pruning's index reads), not its every fire. Writing it made each
    fire's update of the row rewrite every index of the table (job_ended indexes it), where now
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
