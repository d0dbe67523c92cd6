"""Runs: each fire of a job (its schedule, a trigger, an event) starts one.

A plain job's run is its one execution. A workflow job's run is a Run row and an execution per
step (executions/steps.py makes them and moves them along). The dispatcher admits a workflow run
when it claims the run's first step: the job's misfire and concurrency policies apply to the run
as a whole, and a cron job's next run is made then, in the claim's transaction, as a plain cron
job's next fire is (dispatcher/dispatcher.py).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from executions import buffering, steps, transitions
from executions.models import Execution, Origin, Run
from executions.states import TERMINAL, ExecutionState, InvalidTransition
from jobs import misfire, overlap, recurrence, workflow
from jobs.fields import FIELDS, group_of
from jobs.models import ConcurrencyPolicy, Job, MisfirePolicy
from scheduling.execution_changes import execution_cancel
from store import Moved, store
from telemetry import tracing

S = ExecutionState
OPEN = [state for state in ExecutionState if state not in TERMINAL]


@dataclass(frozen=True)
class Fired:
    run_id: uuid.UUID | None  # None for a plain job: its run is its execution
    executions: list[Execution]  # in the workflow's order of steps


def run_steps(job: Job) -> list[dict[str, Any]]:
    """The job's workflow steps as a run keeps them: each with what a step may set of its own
    (jobs/fields.py: its timeout, its retry policy) made explicit, the job's where the step says
    nothing, so that a later change of the job changes no run already made."""
    assert job.workflow is not None
    own = [field for field in FIELDS if field.step and not field.group]
    groups = list(dict.fromkeys(field.group for field in FIELDS if field.step and field.group))
    made = []
    for step in job.workflow["steps"]:  # a step names what it sets as the job's field (jobs/workflow.py)
        kept = dict(step)
        for field in own:
            kept[field.name] = step.get(field.name) or getattr(job, field.name)
        for group in groups:
            kept[group] = {**group_of(job, group), **(step.get(group) or {})}
        made.append(kept)
    return made


def fire(
    *,
    job: Job,
    scheduled_for: datetime,
    now: datetime,
    origin: str = Origin.SCHEDULE,
    event_id: Any = None,
    wake: bool = True,
) -> Fired:
    """Start a run of `job` due at `scheduled_for`: one PENDING execution for a plain job; for a
    workflow job a Run with its root steps PENDING and the others BLOCKED."""
    if not job.workflow:
        execution = transitions.create(
            job=job, scheduled_for=scheduled_for, now=now, origin=origin, wake=wake, event_id=event_id
        )
        return Fired(None, [execution])
    run = Run.objects.create(
        job_id=job.pk,
        tenant_id=job.tenant_id,
        origin=origin,
        scheduled_for=scheduled_for,
        steps=run_steps(job),
        event_id=event_id,
        created_at=now,
    )
    return Fired(run.pk, steps.create_run(run=run, priority=job.priority, now=now, wake=wake))


def cancel_run(*, run_id: Any, now: datetime, reason: str, running: bool = True) -> int:
    """Cancel every unfinished step of the run: BLOCKED, PENDING and QUEUED ones now, RUNNING ones
    cooperatively (a cancel request, as for any running execution), unless not `running` (a
    cancelled job's started runs finish). Returns how many it touched."""
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).filter(pk=run_id).first()
        if run is None:
            return 0
        # BLOCKED first, all with the run's reason: cancelling a root first would cancel them as
        # its downstream steps, with another message.
        blocked = list(Execution.objects.filter(run_id=run_id, state=S.BLOCKED).values_list("step", flat=True))
        touched = len(steps.cancel_blocked(run_id=run_id, names=blocked, now=now, reason=reason))
        unstarted = [S.PENDING, S.QUEUED, S.RUNNING] if running else [S.PENDING, S.QUEUED]
        for execution in Execution.objects.filter(run_id=run_id, state__in=unstarted):
            try:
                execution_cancel(execution=execution, now=now, reason=reason)
                touched += 1
            except InvalidTransition:
                pass  # it finished meanwhile
    return touched


def admit(*, claimed: Sequence[Moved], now: datetime, misfire_grace: timedelta) -> tuple[set, int]:
    """The dispatcher claimed `claimed`; for each workflow run among theirs claimed for the first
    time, apply its job's policies to the run as a whole and, for a cron job's scheduled run, make
    the next one. Returns the ids of the claimed executions not to publish (their run was
    skipped) and how many runs were made. In the claim's transaction."""
    run_ids = {m.run_id for m in claimed if m.run_id is not None}
    if not run_ids:
        return set(), 0
    fresh = list(
        Run.objects.select_for_update(no_key=True)
        .filter(pk__in=run_ids, admitted=False)
        .select_related("job")
        .order_by("scheduled_for")
    )
    skipped_runs: set = set()
    made = 0
    for run in fresh:
        job = run.job
        reason = _policy_verdict(run, job, now=now, grace=misfire_grace)
        if reason == overlap.BUFFERED_REASON:
            _buffer_run(run.pk, now=now)
            skipped_runs.add(run.pk)
        elif reason:
            cancel_run(run_id=run.pk, now=now, reason=reason)
            skipped_runs.add(run.pk)
        Run.objects.filter(pk=run.pk).update(admitted=True)
        if job.is_recurring and run.origin == Origin.SCHEDULE:
            previous = next((m.traceparent for m in claimed if m.run_id == run.pk), "")
            made += _make_next(job, after=run.scheduled_for, now=now, previous=previous)
    return {m.id for m in claimed if m.run_id in skipped_runs}, made


def _policy_verdict(run: Run, job: Job, *, now: datetime, grace: timedelta) -> str:
    """Why the run must not run (its misfire or concurrency policy), or "" when it runs. Under
    REPLACE the job's other unfinished runs are cancelled here. As for a plain job's fires, the
    policies are the schedule's: a cron job's scheduled runs; a trigger ("run now") or an event
    is asked for and runs."""
    if not job.is_recurring or run.origin != Origin.SCHEDULE:
        return ""
    schedule = recurrence.of_job(job)
    missed = misfire.skip_reason(
        policy=job.misfire_policy,
        scheduled_for=run.scheduled_for,
        now=now,
        grace=grace,
        window=misfire.window_of(job.catchup_window_sec),
        next_fire=schedule.next_fire if schedule is not None else None,
    )
    if missed:
        return missed
    if job.concurrency_policy == ConcurrencyPolicy.ALLOW:
        return ""
    if job.concurrency_policy == ConcurrencyPolicy.BUFFER_ONE:
        running, buffered = _other_runs(job.pk, run.pk)
        verdict = overlap.buffer_one(running=bool(running), buffered=bool(buffered))
        return {overlap.Verdict.BUFFER: overlap.BUFFERED_REASON, overlap.Verdict.SKIP: overlap.SKIPPED_REASON}.get(
            verdict, ""
        )
    # A run is active while any of its steps can still run (BLOCKED and PENDING ones too).
    others = set(
        Execution.objects.filter(job_id=job.pk, state__in=OPEN)
        .exclude(run_id=run.pk)
        .exclude(origin=Origin.BACKFILL)  # outside the schedule's overlap (docs/backfill.md)
        .values_list("run_id", flat=True)
    )
    if not others:
        return ""
    if job.concurrency_policy == ConcurrencyPolicy.FORBID:
        return "skipped: the previous run is still active (concurrencyPolicy FORBID)"
    for other in sorted(others - {None}, key=str):
        cancel_run(run_id=other, now=now, reason=f"replaced by run {run.pk} (concurrencyPolicy REPLACE)")
    return ""


def _other_runs(job_id: Any, run_id: Any) -> tuple[set, set]:
    """The job's admitted runs other than `run_id` that have a step that can still run: those in
    progress, and those buffered (BUFFER_ONE: every such step BLOCKED, none begun; a run in
    progress always has a step begun or due, since a BLOCKED step is released or cancelled in the
    transaction that ends the step above it)."""
    rows = (
        Execution.objects.filter(job_id=job_id, state__in=OPEN, run__admitted=True)
        .exclude(run_id=run_id)
        .exclude(origin=Origin.BACKFILL)
        .values_list("run_id", "state")
    )
    open_runs: dict[Any, set] = {}
    for other, state in rows:
        open_runs.setdefault(other, set()).add(state)
    buffered = {other for other, states in open_runs.items() if states == {S.BLOCKED}}
    return set(open_runs) - buffered, buffered


def _buffer_run(run_id: Any, *, now: datetime) -> None:
    """BUFFER_ONE: the run waits whole for the job's run in progress: its steps not yet BLOCKED
    (its roots, claimed now or still PENDING) are, until `release_buffered` starts it."""
    for execution_id, state in Execution.objects.filter(run_id=run_id, state__in=[S.PENDING, S.QUEUED]).values_list(
        "id", "state"
    ):
        buffering.buffer(execution_id=execution_id, source=S(state), now=now, reason=overlap.BUFFERED_REASON)


def release_buffered(*, now: datetime, limit: int) -> int:
    """Start the buffered runs (BUFFER_ONE: admitted, every step that can still run BLOCKED and
    none begun) whose job has no other run in progress: each one's root steps are released as any
    step whose upstream steps are done (steps.settle_run), due now. Whatever the job's policy is
    now: a fire that waits is started once the run it waits for ended. Returns how many started."""
    begun = [state for state in OPEN if state != S.BLOCKED]
    waiting = (
        Run.objects.filter(admitted=True, executions__state=S.BLOCKED)
        .exclude(executions__state__in=begun)
        .values_list("pk", "job_id")
        .distinct()[:limit]
    )
    started = 0
    for run_id, job_id in sorted(waiting, key=lambda row: str(row[0])):
        running, _ = _other_runs(job_id, run_id)
        if overlap.releases(running=bool(running), buffered=True):
            steps.settle_run(run_id, now=now)
            started += 1
    if started:
        store().notify_due(now)
    return started


def _make_next(job: Job, *, after: datetime, now: datetime, previous: str = "") -> int:
    """The recurring job's next run after the fire `after` (past `now` unless RUN_ALL backfills);
    none if a claim made it already (the unique index of fires decides). The run is a trace of
    its own, linked to the run before it (`previous`, its trace context)."""
    schedule = recurrence.of_job(job)
    assert schedule is not None  # only a recurring job's scheduled run is followed by another
    fire_at = schedule.next_fire(after)
    if fire_at <= now and job.misfire_policy != MisfirePolicy.RUN_ALL:
        fire_at = schedule.next_fire(now)
    try:
        with transaction.atomic(), tracing.fire_trace(job_id=job.pk, scheduled_for=fire_at, previous=previous):
            fire(job=job, scheduled_for=fire_at, now=now, wake=False)
    except IntegrityError:
        return 0
    finally:
        transitions.advance_jobs(next_fires={job.pk: fire_at})
    return 1


def step_spec(*, run_id: Any, name: str) -> dict[str, Any]:
    """A step of a run as the run keeps it (its target, payload, policies): what its handler runs."""
    run_steps_ = Run.objects.filter(pk=run_id).values_list("steps", flat=True).first() or []
    return dict(workflow.step_of(run_steps_, name))


def upstream_results(*, run_id: Any, step: str) -> dict[str, Any]:
    """The results of the steps `step` depends on directly, by name (all SUCCEEDED once it runs)."""
    spec = step_spec(run_id=run_id, name=step)
    above = list(spec.get("depends_on") or [])
    if not above:
        return {}
    rows = Execution.objects.filter(run_id=run_id, step__in=above, state=S.SUCCEEDED).values_list("step", "result")
    return dict(rows)
