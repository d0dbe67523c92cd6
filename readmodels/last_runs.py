"""A job's last run, as the job resource and the dashboard show it: its state in run terms
(readmodels.runs.run_state: RUNNING, SUCCEEDED, FAILED, CANCELLED; never PENDING, as it has
begun) and when it last moved, so that a one-off whose run failed reads as failed rather than
merely completed; and the failing jobs, those whose last run ended FAILED.

The last run is the job's newest execution that has begun: not one still waiting for its first
attempt (a cron job's next fire, a one-off before its time, a workflow step waiting upstream). A
workflow job's last run is that execution's Run, all its steps. Read, not stored: one probe of
execution_job_fire (job, scheduled_for, …), walked backwards, per job, so a page of jobs costs one
statement for their newest executions and one for their runs' steps, and nothing is written on
the hot path. The failing filter probes each job in scope the same way: it follows the number of jobs,
never the history.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from executions import standing
from executions.models import Execution
from executions.states import ExecutionState
from jobs.models import Job
from readmodels.runs import UNFINISHED_RUN_STATES, run_state

S = ExecutionState
# The ends that make a run FAILED: a step (or the execution) DEAD, or discarded from the dead
# letter since (it failed all the same).
FAILED_ENDS = (S.DEAD, S.DISCARDED)


@dataclass(frozen=True)
class LastRun:
    state: str | None  # readmodels.runs.RUN_STATES, or None before the first run
    at: datetime | None  # when it ended; while it runs, when it started or last moved


NONE = LastRun(None, None)


def _begun() -> Q:
    """Executions that have begun: not waiting for their first attempt (readmodels.runs.step_begun)."""
    return ~Q(state=S.BLOCKED) & ~Q(state=S.PENDING, attempt=1)


def _newest_begun() -> QuerySet[Execution]:
    # By scheduled_for alone, so that the probe is a walk of execution_job_fire that stops at
    # its first begun entry (a tie-break would sort each job's executions first).
    return Execution.objects.filter(_begun(), job=OuterRef("pk")).order_by("-scheduled_for")


def last_runs(jobs: Iterable[Job]) -> dict[Any, LastRun]:
    """Each job's last run (NONE before its first), by job id: two statements for any number."""
    ids = [job.pk for job in jobs]
    if not ids:
        return {}
    newest = dict(
        Job.objects.filter(pk__in=ids)
        .annotate(last=Subquery(_newest_begun().values("pk")[:1]))
        .values_list("pk", "last")
    )
    rows = {
        row["pk"]: row
        for row in Execution.objects.filter(pk__in=[e for e in newest.values() if e is not None]).values(
            "pk", "job_id", "run_id", "state", "attempt", "finished_at", "started_at", "updated_at"
        )
    }
    run_ids = {row["run_id"] for row in rows.values() if row["run_id"] is not None}
    steps: dict[Any, list[Any]] = {}
    if run_ids:
        for step in Execution.objects.filter(run_id__in=run_ids).values(
            "run_id", "state", "attempt", "finished_at", "started_at", "updated_at"
        ):
            steps.setdefault(step["run_id"], []).append(step)
    found = {}
    for job_id, execution_id in newest.items():
        row = rows.get(execution_id)
        if row is None:
            found[job_id] = NONE
            continue
        parts = steps.get(row["run_id"], [row]) if row["run_id"] is not None else [row]
        state = run_state((part["state"], part["attempt"]) for part in parts)
        found[job_id] = LastRun(state, max(_moved_at(part, state) for part in parts))
    return found


def _moved_at(row: Any, state: str) -> datetime:
    if state not in UNFINISHED_RUN_STATES and row["finished_at"] is not None:
        return row["finished_at"]
    return row["started_at"] or row["updated_at"]


def attach_last_runs(jobs: list[Job], *, new: bool = False) -> list[Job]:
    """Set `last_run` on each of a page's jobs (what the job resource's lastRunState and
    lastRunAt read), in two statements, and whether each one-off has ended (its state and times
    as shown: executions.standing) in one more; none for jobs just created (`new`), which have
    not run. Returns the jobs."""
    found = {} if new else last_runs(jobs)
    if new:
        for job in jobs:
            job.ended_at = None
    else:
        standing.attach(jobs)
    for job in jobs:
        job.last_run = found.get(job.pk, NONE)  # type: ignore[attr-defined]  # read by web/api/job_serializers.py
    return jobs


def last_run(job: Job) -> LastRun:
    return last_runs([job]).get(job.pk, NONE)


def failing(jobs: QuerySet[Job], *, failed: bool = True) -> QuerySet[Job]:
    """The jobs whose last run ended FAILED (with failed=False: all the others): the newest
    begun execution is DEAD or discarded, or is a step of a run that has a step so."""
    newest = _newest_begun()
    failed_step = Execution.objects.filter(run_id=OuterRef("last_run_of"), state__in=FAILED_ENDS)
    # A run's other steps are read for the workflow jobs only, in a subquery of their own that the
    # database runs once: a plain job costs one probe, and the planner's estimate stays small.
    failed_workflows = (
        Job.objects.filter(workflow__isnull=False)
        .annotate(last_run_of=Subquery(newest.values("run_id")[:1]))
        .filter(Exists(failed_step))
        .values("pk")
    )
    jobs = jobs.annotate(last_state=Subquery(newest.values("state")[:1]))
    condition = Q(last_state__in=FAILED_ENDS) | Q(pk__in=failed_workflows)
    return jobs.filter(condition) if failed else jobs.exclude(condition)
