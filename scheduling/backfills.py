"""Backfills (docs/backfill.md): a job's fires in a past range [start, end), each run once.

The fires are the job's own (jobs/recurrence.py: its cron expression in its timezone, DST and `H`
as the dispatcher resolves them, or its interval), planned when the backfill is made, with what
each does (`FireAction`): RUN a fire that has no run, SKIP one that has (or that another running
backfill will release), RERUN one that has when `reprocess` asks (FAILED: its last run ended
DEAD, CANCELLED or DISCARDED; ALL: any). The plan is the dry run's answer too: one function.

A backfill's runs are ordinary PENDING executions (origin BACKFILL), admitted by the claim like
any work (priority, fair share, tenant and pool limits). `backfill_release` (the sweeper's
backfill service) releases them a few at a time, so that no more than `max_concurrent` of one
backfill are unfinished at once: a cap kept by who makes the runs, not by the claim, which stays
as it is (one query, unaware of backfills).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from executions import backfills as backfill_transitions
from executions.models import (
    Backfill,
    BackfillFire,
    BackfillOrder,
    Execution,
    FireAction,
    Origin,
    Reprocess,
)
from executions.states import TERMINAL, BackfillState, ExecutionState, InvalidTransition
from jobs import recurrence
from jobs.models import Job
from jobs.states import ENDED as JOB_ENDED
from jobs.states import InvalidJobTransition, JobState
from machines import InvalidMove
from scheduling import runs
from scheduling.execution_changes import execution_cancel
from store import store

S = ExecutionState
MAX_FIRES = 10_000  # per backfill
MAX_CONCURRENT = 100
# A fire's last run ended so: reprocess FAILED runs it again.
FAILED_ENDS = frozenset({S.DEAD, S.CANCELLED, S.DISCARDED})
_MICROSECOND = timedelta(microseconds=1)


class BackfillRefused(Exception):
    """A backfill that cannot be made as asked: `field` names what to change."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


class BackfillEnded(InvalidMove):
    """A cancel asked, with `refuse_ended`, of a backfill that has ended (DONE or CANCELLED)."""


@dataclass(frozen=True)
class PlannedFire:
    scheduled_for: datetime
    action: str  # FireAction
    reason: str  # why, as a person reads it


def backfill_fires(*, job: Job, start: datetime, end: datetime, limit: int = MAX_FIRES) -> list[datetime]:
    """The job's fires in [start, end), in order, at most `limit` + 1 (one more says "too many").
    The schedule's own arithmetic (jobs/recurrence.py), never a second one."""
    schedule = recurrence.of_job(job)
    if schedule is None:
        raise BackfillRefused("type", f"a {job.type} job has no schedule to backfill; only CRON and INTERVAL jobs do")
    # fires_between answers (a, b]; [start, end) is (start - 1µs, end - 1µs] at the database's precision.
    return schedule.fires_between(start - _MICROSECOND, end - _MICROSECOND, limit=limit + 1)


def _outcomes(job: Job, start: datetime, end: datetime) -> dict[datetime, str]:
    """Per fire of the range that has a run: how its last run stands, "open", "failed" or
    "succeeded" (a workflow run by its steps: failed when one ended so and none can still run)."""
    last: dict[datetime, str] = {}
    if job.workflow:
        states: dict[Any, tuple[datetime, datetime, set]] = {}
        rows = Execution.objects.filter(job=job, run__isnull=False, scheduled_for__gte=start, scheduled_for__lt=end)
        for run_id, at, made, state in rows.values_list("run_id", "scheduled_for", "run__created_at", "state"):
            states.setdefault(run_id, (at, made, set()))[2].add(state)
        for at, _, run_states in sorted(states.values(), key=lambda row: row[1]):
            last[at] = _outcome(run_states)
    else:
        rows = Execution.objects.filter(job=job, scheduled_for__gte=start, scheduled_for__lt=end)
        for at, state in rows.order_by("created_at").values_list("scheduled_for", "state"):
            last[at] = _outcome({state})
    # What another running backfill of the job will release counts as a run already there.
    planned = BackfillFire.objects.filter(
        backfill__job=job,
        backfill__state=BackfillState.RUNNING,
        released_at__isnull=True,
        scheduled_for__gte=start,
        scheduled_for__lt=end,
    ).exclude(action=FireAction.SKIP)
    for at in planned.values_list("scheduled_for", flat=True):
        last[at] = "open"
    return last


def _outcome(states: set) -> str:
    if not states <= TERMINAL:
        return "open"
    return "failed" if states & FAILED_ENDS else "succeeded"


def _verdict(outcome: str | None, reprocess: str) -> tuple[str, str]:
    if outcome is None:
        return FireAction.RUN, "no run yet"
    if reprocess == Reprocess.ALL:
        return FireAction.RERUN, f"runs again (its last run {outcome})"
    if reprocess == Reprocess.FAILED and outcome == "failed":
        return FireAction.RERUN, "runs again: its last run failed"
    explained = {
        "open": "a run is in progress or planned",
        "failed": "its run failed",
        "succeeded": "its run succeeded",
    }
    return FireAction.SKIP, f"exists: {explained[outcome]}"


def backfill_plan(
    *, job: Job, start: datetime, end: datetime, order: str, reprocess: str, now: datetime
) -> list[PlannedFire]:
    """The backfill's fires in the order they would run, each with what it would do. Writes
    nothing: the dry run's answer, and what `backfill_create` stores."""
    if start >= end:
        raise BackfillRefused("to", "must be after from")
    if end > now:
        raise BackfillRefused("to", "a backfill covers the past: to must not be after now (the schedule runs the rest)")
    fires = backfill_fires(job=job, start=start, end=end)
    if len(fires) > MAX_FIRES:
        raise BackfillRefused(
            "to", f"the range holds more than {MAX_FIRES} fires (the {MAX_FIRES + 1}th is at {fires[-1].isoformat()})"
        )
    outcomes = _outcomes(job, start, end)
    planned = [PlannedFire(at, *_verdict(outcomes.get(at), reprocess)) for at in fires]
    return planned[::-1] if order == BackfillOrder.NEWEST_FIRST else planned


def backfill_create(
    *,
    job: Job,
    start: datetime,
    end: datetime,
    order: str,
    reprocess: str,
    max_concurrent: int,
    now: datetime,
) -> Backfill:
    """Make a backfill of the job over [start, end) and plan its fires (none released yet: the
    backfill service does that). Under the job's row lock, so that two backfills made at once of
    the same range plan each fire once."""
    if not 1 <= max_concurrent <= MAX_CONCURRENT:
        raise BackfillRefused("maxConcurrent", f"must be from 1 to {MAX_CONCURRENT}")
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state not in (JobState.ACTIVE, JobState.PAUSED):
            raise InvalidJobTransition(
                job.pk, job.state, "backfilled", f"the job is {job.state.lower()}; it runs no more"
            )
        plan = backfill_plan(job=job, start=start, end=end, order=order, reprocess=reprocess, now=now)
        backfill = Backfill.objects.create(
            job=job,
            tenant_id=job.tenant_id,
            range_from=start,
            range_to=end,
            order=order,
            reprocess=reprocess,
            max_concurrent=max_concurrent,
            created_at=now,
        )
        BackfillFire.objects.bulk_create(
            [
                BackfillFire(backfill=backfill, position=i, scheduled_for=fire.scheduled_for, action=fire.action)
                for i, fire in enumerate(plan)
            ],
            batch_size=1000,
        )
    return backfill


def _unfinished(backfill: Backfill) -> int:
    """How many of the backfill's released runs can still run (their executions not ended)."""
    released = BackfillFire.objects.filter(backfill=backfill, released_at__isnull=False)
    open_states = [state for state in ExecutionState if state not in TERMINAL]
    plain = Execution.objects.filter(
        pk__in=released.filter(execution_id__isnull=False).values("execution_id"), state__in=open_states
    ).count()
    workflow = (
        Execution.objects.filter(
            run_id__in=released.filter(run_id__isnull=False).values("run_id"), state__in=open_states
        )
        .values("run_id")
        .distinct()
        .count()
    )
    return plain + workflow


def backfill_release(*, now: datetime, limit: int) -> tuple[int, int]:
    """For each RUNNING backfill (at most `limit` fires in all): release its next fires, in its
    order, as runs (origin BACKFILL, due at once) until `max_concurrent` of its runs are
    unfinished; finish those with nothing left to release or run. A paused job's backfill waits;
    a cancelled job's is cancelled. Returns (fires released, backfills finished)."""
    released = finished = 0
    for backfill_id in (
        Backfill.objects.filter(state=BackfillState.RUNNING).order_by("created_at").values_list("pk", flat=True)
    ):
        if released >= limit:
            break
        with transaction.atomic():
            backfill = (
                Backfill.objects.select_for_update(skip_locked=True)
                .filter(pk=backfill_id, state=BackfillState.RUNNING)
                .select_related("job")
                .first()
            )
            if backfill is None:
                continue  # another sweeper has it, or it ended
            job = backfill.job
            if job.standing in JOB_ENDED:
                backfill_transitions.backfill_cancel(backfill_id=backfill.pk, now=now)
                finished += 1
                continue
            waiting = BackfillFire.objects.filter(backfill=backfill, released_at__isnull=True).exclude(
                action=FireAction.SKIP
            )
            if job.state == JobState.PAUSED:
                continue  # its runs would wait unclaimed anyway (the claim skips a paused job's)
            unfinished = _unfinished(backfill)
            room = min(backfill.max_concurrent - unfinished, limit - released)
            batch = list(waiting.order_by("position")[: max(room, 0)])
            for fire in batch:
                fired = runs.fire(
                    job=job, scheduled_for=fire.scheduled_for, now=now, origin=Origin.BACKFILL, wake=False
                )
                fire.released_at = now
                fire.run_id = fired.run_id
                fire.execution_id = None if fired.run_id else fired.executions[0].pk
                fire.save(update_fields=["released_at", "run_id", "execution_id"])
            released += len(batch)
            if batch:
                store().notify_due(now)
            elif unfinished == 0 and not waiting.exists():
                finished += backfill_transitions.backfill_finish(backfill_id=backfill.pk, now=now)
    return released, finished


def backfill_cancel(*, backfill: Backfill, now: datetime, reason: str, refuse_ended: bool = False) -> Backfill:
    """Cancel the backfill: nothing more is released, and its runs not started (PENDING, QUEUED,
    BLOCKED) are cancelled; what runs finishes. A finished backfill is answered as it is (the
    API's idempotent cancel), or with `refuse_ended` refused by BackfillEnded (the dashboard's
    Cancel on a row that ended meanwhile: the operator is told, and the audit log says REFUSED)."""
    with transaction.atomic():
        cancelled = backfill_transitions.backfill_cancel(backfill_id=backfill.pk, now=now)
        if not cancelled and refuse_ended:
            state = Backfill.objects.values_list("state", flat=True).get(pk=backfill.pk)
            raise BackfillEnded(f"the backfill has ended ({state}): nothing is left to cancel")
        if cancelled:
            fires = BackfillFire.objects.filter(backfill=backfill, released_at__isnull=False)
            for run_id in fires.filter(run_id__isnull=False).values_list("run_id", flat=True):
                runs.cancel_run(run_id=run_id, now=now, reason=reason, running=False)
            unstarted = Execution.objects.filter(
                pk__in=fires.filter(execution_id__isnull=False).values("execution_id"),
                state__in=[S.PENDING, S.QUEUED],
            )
            for execution in unstarted:
                try:
                    execution_cancel(execution=execution, now=now, reason=reason)
                except InvalidTransition:
                    pass  # it finished meanwhile
    return Backfill.objects.get(pk=backfill.pk)
