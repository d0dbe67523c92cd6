"""A one-off job's COMPLETED, read from its executions rather than stored (jobs/states.py).

A one-off (ONCE, DELAYED) job whose row is ACTIVE has ended once none of its executions can run
any more: each is SUCCEEDED, CANCELLED, DEAD or DISCARDED (or pruned since). Its readers see it
COMPLETED, with no next fire, changed when its last run ended: what the store used to write into
the job's row in the statement that ended the run, a second version of the row and of each of its
index entries for every one-off. A trigger or a re-drive gives it an execution that can run, and
it reads ACTIVE again with no write of the job either.

What reads it: a page of jobs in one statement (`attach`), a job alone on first use of its
`standing` (the reader installed by executions.apps), and the filters and counts by state
(`jobs_in`, `counts`), as conditions on the job's executions.
"""

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet

from executions.models import Execution, in_states
from executions.states import TERMINAL, ExecutionState
from jobs.models import ONE_OFF_TYPES, Job, JobType
from jobs.states import JobState, StoredJobState

# The execution states from which a run can still happen.
CAN_RUN = tuple(state for state in ExecutionState if state not in TERMINAL)


def _can_run() -> QuerySet[Execution]:
    # "Not ended" rather than "in a state that can run": the probe walks the job's few executions
    # (execution_job_fire leads with the job) instead of a bitmap of every pending one.
    return Execution.objects.filter(job_id=OuterRef("pk")).exclude(state__in=TERMINAL)


def completed() -> Q:
    """The jobs that read COMPLETED."""
    # The columns first: PostgreSQL tests an AND's arms in order, so a recurring job costs no probe.
    return Q(Q(state=StoredJobState.ACTIVE, type__in=ONE_OFF_TYPES), ~Exists(_can_run()))


def jobs_in(states: Iterable[str]) -> Q:
    """The jobs that read one of `states`: COMPLETED as `completed`, ACTIVE as stored but not it."""
    condition = Q(pk__in=[])
    for state in set(states):
        if state == JobState.COMPLETED:
            condition |= completed()
        elif state == JobState.ACTIVE:  # as above: a recurring job's type answers the OR at once
            condition |= Q(Q(state=StoredJobState.ACTIVE), ~Q(type__in=ONE_OFF_TYPES) | Exists(_can_run()))
        else:
            condition |= Q(state=state)
    return condition


def _live_one_offs(jobs: QuerySet[Job]) -> int:
    """How many of `jobs` are ACTIVE one-offs with an execution that can still run, read from
    those executions (an index per state: `in_states`): it follows the backlog, not the history."""
    one_offs = jobs.filter(state=StoredJobState.ACTIVE, type__in=ONE_OFF_TYPES).values("pk")
    return Execution.objects.filter(in_states(CAN_RUN), job_id__in=one_offs).values("job_id").distinct().count()


def counts(jobs: QuerySet[Job]) -> dict[str, int]:
    """How many of `jobs` read each state: a count per stored state and type (job_tenant_state,
    index only), the ACTIVE one-offs that can still run ACTIVE, the others COMPLETED."""
    found = {state: 0 for state in JobState.values}
    for row in jobs.order_by().values("state", "type").annotate(n=Count("*")):
        ended_maybe = row["state"] == StoredJobState.ACTIVE and row["type"] in ONE_OFF_TYPES
        found[JobState.COMPLETED if ended_maybe else row["state"]] += row["n"]
    if found[JobState.COMPLETED]:
        live = _live_one_offs(jobs)
        found[JobState.COMPLETED] -= live
        found[JobState.ACTIVE] += live
    return found


def live_count(jobs: QuerySet[Job]) -> int:
    """How many of `jobs` read ACTIVE or PAUSED (what a tenant's maxActiveJobs counts): ranges of
    job_tenant_state by state and type that leave the one-offs' ACTIVE rows out, however many
    ended ones a tenant keeps, and those of them that can still run."""
    others = [t for t in JobType.values if t not in ONE_OFF_TYPES]
    kept = jobs.filter(state__in=[StoredJobState.ACTIVE, StoredJobState.PAUSED], type__in=others).count()
    paused = jobs.filter(state=StoredJobState.PAUSED, type__in=ONE_OFF_TYPES).count()
    return kept + paused + _live_one_offs(jobs)


def ends(jobs: Collection[Job]) -> dict[Any, datetime | None]:
    """For each ACTIVE one-off among `jobs`, by id: when its last run ended if none can run any
    more, else None. One statement for any number."""
    ids = [job.pk for job in jobs if job.state == StoredJobState.ACTIVE and job.type in ONE_OFF_TYPES]
    if not ids:
        return {}
    by_id = {job.pk: job for job in jobs}
    # Every execution of it pruned: it ended long ago, when is no longer known.
    found: dict[Any, datetime | None] = {job_id: by_id[job_id].updated_at for job_id in ids}
    rows = (
        Execution.objects.filter(job_id__in=ids)
        .order_by()
        .values("job_id")
        .annotate(can_run=Count("pk", filter=~Q(state__in=TERMINAL)), last=Max("finished_at"))
    )
    for row in rows:
        job_id = row["job_id"]
        found[job_id] = None if row["can_run"] else (row["last"] or by_id[job_id].updated_at)
    return found


def attach(jobs: Collection[Job]) -> None:
    """Set each job's `ended_at` (what its `standing` and shown times read) in one statement."""
    found = ends(jobs)
    for job in jobs:
        job.ended_at = found.get(job.pk)


def read_one(job: Job) -> datetime | None:
    """A job's `ended_at`, read alone (installed as Job's reader: executions.apps)."""
    return ends([job]).get(job.pk)
