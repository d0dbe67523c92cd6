"""Workflow steps: how a run's executions are made, the named transitions out of and into BLOCKED,
and what a step's end does to the rest of its run.

A run (executions.models.Run) has an execution per step of its workflow (jobs/workflow.py). Its
root steps are PENDING from the start; the others wait in BLOCKED. Whenever a step of a run
ends (SUCCEEDED, DEAD, CANCELLED), `settle_run` looks at the whole run in the same transaction:

- a BLOCKED step whose upstream steps have all SUCCEEDED is released: PENDING, due now;
- a BLOCKED step with a DEAD or CANCELLED step above it (directly or not) can never run: it is
  CANCELLED, its event naming that upstream step.

Two upstream steps that succeed at the same moment in two transactions must not both miss the
release (each would see the other still RUNNING): `settle_run` first locks the run's row, so the
second waits for the first to commit and then, reading afresh (READ COMMITTED reads each
statement's own snapshot), sees both successes. On SQLite there is one writer at a time anyway.
Everything a run does still flows through the one due index and the one claim.
"""

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from executions import observers, tallies
from executions.models import Execution, Run
from executions.moves import FRESH_ATTEMPT, moves
from executions.states import ExecutionState
from jobs import transitions as job_transitions
from jobs import workflow
from store import Moved, store
from telemetry import tracing

S = ExecutionState
# What ends a step for good as far as its downstream steps are concerned.
_FAILED_UPSTREAM = frozenset({S.DEAD, S.CANCELLED})


def create_run(*, run: Run, priority: int, now: datetime, wake: bool = True) -> list[Execution]:
    """∅ → PENDING for `run`'s root steps and ∅ → BLOCKED for the others, in a constant number of
    statements. A root step's first event is told by its columns (store/history.py); a BLOCKED
    step's is written as a row, and its history stays rows. Returns the executions in the steps'
    order. Every step carries the trace context it is made in, so the whole run is one trace."""
    roots = set(workflow.roots(run.steps))
    trace = tracing.traceparent()
    executions = [
        Execution(
            id=uuid.uuid4(),
            job_id=run.job_id,
            tenant_id=run.tenant_id,
            run_id=run.pk,
            step=step["name"],
            pool=step["target"]["pool"],
            priority=priority,
            origin=run.origin,
            event_id=run.event_id,
            state=S.PENDING if step["name"] in roots else S.BLOCKED,
            scheduled_for=run.scheduled_for,
            available_at=run.scheduled_for,
            traceparent=trace,
            created_at=now,
            history_derived=step["name"] in roots,
        )
        for step in run.steps
    ]
    store().insert_new(executions)
    blocked = [(e.id, 1, "") for e in executions if e.state == S.BLOCKED]
    if blocked:
        store().record_events(blocked, source="", target=S.BLOCKED, now=now, message="waits for its upstream steps")
    if wake:
        store().notify_due(run.scheduled_for)
    return executions


@moves([S.BLOCKED], S.PENDING)
def release_steps(*, run_id: Any, names: Sequence[str], now: datetime) -> list[Moved]:
    """BLOCKED → PENDING, due now, for the steps `names` of the run: their upstream steps have all
    succeeded. Wakes the dispatchers."""
    if not names:
        return []
    moved, changes = store().release_steps(
        run_id=run_id, names=names, now=now, message="released: its upstream steps succeeded"
    )
    observers.announce(changes)
    if moved:
        store().notify_due(now)
    return moved


@moves([S.BLOCKED], S.CANCELLED)
def cancel_blocked(*, run_id: Any, names: Sequence[str], now: datetime, reason: str) -> list[Moved]:
    """BLOCKED → CANCELLED for the steps `names` of the run: they will not run (`reason` says why)."""
    if not names:
        return []
    moved, changes = store().cancel_steps(run_id=run_id, names=names, now=now, message=reason)
    observers.announce(changes)
    return moved


@moves([S.CANCELLED], S.BLOCKED)
def reblock(*, run_id: Any, names: Sequence[str], now: datetime, reason: str) -> list[Moved]:
    """CANCELLED → BLOCKED for the steps `names` of the run: an upstream step was re-driven, so
    they wait for it again. One that had started (and was cancelled while running) runs again as
    its next attempt."""
    if not names:
        return []
    # Their ends still count in the metrics, and a new attempt here is not a retry (tallies.py).
    with tallies.folding(Execution.objects.filter(run_id=run_id, step__in=names, state=S.CANCELLED)):
        moved, changes = store().reblock_steps(run_id=run_id, names=names, now=now, message=reason, fresh=FRESH_ATTEMPT)
    observers.announce(changes)
    return moved


def settle_run(run_id: Any, *, now: datetime) -> None:
    """After a step of the run ended: release the BLOCKED steps whose upstream steps all
    succeeded, and cancel the BLOCKED steps that a DEAD or CANCELLED step above them keeps from
    ever running. Call in the transaction that recorded the step's end."""
    run = Run.objects.select_for_update(no_key=True).only("steps", "job_id").filter(pk=run_id).first()
    if run is None:
        return
    states = dict(Execution.objects.filter(run_id=run_id).values_list("step", "state"))
    if len(states) == len(run.steps) and all(state == S.SUCCEEDED for state in states.values()):
        # The run succeeded: its job's count of consecutive failed fires starts again.
        job_transitions.failed_fires_reset(job_ids=[run.job_id])
    release_steps(
        run_id=run_id, names=workflow.ready(run.steps, states, succeeded=S.SUCCEEDED, blocked=S.BLOCKED), now=now
    )
    causes = workflow.doomed(run.steps, states, blocked=S.BLOCKED, failed=_FAILED_UPSTREAM)
    by_cause: dict[str, list[str]] = {}
    for name, cause in causes.items():
        by_cause.setdefault(cause, []).append(name)
    for cause, names in by_cause.items():
        reason = f"upstream step '{cause}' ended {states[cause]}"
        cancel_blocked(run_id=run_id, names=names, now=now, reason=reason)


def settle_runs_of(execution_ids: Iterable[Any], *, now: datetime) -> None:
    """`settle_run` for the run of each of these executions that is a step (one query when none is)."""
    ids = list(execution_ids)
    if ids:
        settle_runs(Execution.objects.filter(pk__in=ids, run__isnull=False).values_list("run_id", flat=True), now=now)


def settle_runs(run_ids: Iterable[Any], *, now: datetime) -> None:
    """`settle_run` for each of these runs."""
    for run_id in sorted({str(run_id) for run_id in run_ids}):  # one order for every transaction: no deadlock
        settle_run(run_id, now=now)


def unmet_upstream(*, run_id: Any, step: str) -> dict[str, str]:
    """The upstream steps of `step` in its run that have not SUCCEEDED, with their states."""
    run = Run.objects.only("steps").filter(pk=run_id).first()
    if run is None:
        return {}
    above = workflow.upstream(run.steps).get(step, [])
    states = dict(Execution.objects.filter(run_id=run_id, step__in=above).values_list("step", "state"))
    return {name: states.get(name, "missing") for name in above if states.get(name) != S.SUCCEEDED}


def reopen_downstream(*, run_id: Any, step: str, now: datetime) -> list[Moved]:
    """A step of the run was re-driven: its CANCELLED downstream steps (directly or not) wait for
    it again (BLOCKED). Call in the transaction of the re-drive."""
    run = Run.objects.select_for_update(no_key=True).only("steps").filter(pk=run_id).first()
    if run is None:
        return []
    below = workflow.descendants(run.steps, [step])
    if not below:
        return []
    return reblock(run_id=run_id, names=below, now=now, reason=f"upstream step '{step}' was re-driven")
