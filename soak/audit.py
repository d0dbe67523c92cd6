"""The soak's verdict: what the rows, their events and the handlers' effects say happened.

Pure functions over plain data (soak/run.py reads it from PostgreSQL), so that each rule is
tested on its own (soak/tests/test_audit.py). The rules:

- nothing lost: every execution ends in a state its kind allows (a plain job: SUCCEEDED);
- nothing completed twice: at most one run of an execution ends SUCCEEDED, and it made exactly
  one effect;
- no stale write accepted: the history is a walk through the state machine, and a success
  recorded for a run carries that run's attempt and worker (a fenced-out worker's result would
  carry its own);
- every effect beyond one explained: a run that made an effect without ending SUCCEEDED must
  have been taken away (FAILED_WORKER_LOST, TIMED_OUT, a forced cancel, a release to PENDING);
- no cron fire doubled or skipped: a cron job's fires are exactly its schedule's, from its first
  fire to the one pending when the soak cancelled it.

A run is a QUEUED → RUNNING event and what ended it (the next move out of RUNNING). An effect
belongs to the run of its attempt in its worker process (the handler writes both down). No clock
is compared: the events' times and the effects' come from different processes' readings.
"""

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from executions.states import TERMINAL, TRANSITIONS
from jobs import cron

# Events that record something other than a move: a re-publish and a cancel request.
NOT_MOVES = frozenset({("QUEUED", "QUEUED"), ("RUNNING", "RUNNING")})
SUCCEEDED, FAILED, CANCELLED = "SUCCEEDED", "FAILED", "CANCELLED"
# soak/handlers.py's error message, as the FAILED event keeps it.
FAILURE_MESSAGE = re.compile(r"attempt (\d+) of (\S+)")
ONE_SECOND = timedelta(seconds=1)


# Each job's state as its readers see it: a one-off whose executions have all ended reads COMPLETED
# (executions/standing.py), its row still ACTIVE.
JOB_STATES = """
SELECT id::text, CASE WHEN state = 'ACTIVE' AND type IN ('ONCE', 'DELAYED') AND NOT EXISTS (
    SELECT 1 FROM executions_execution e WHERE e.job_id = jobs_job.id
    AND e.state NOT IN ('SUCCEEDED', 'CANCELLED', 'DEAD', 'DISCARDED')) THEN 'COMPLETED' ELSE state END,
    created_at
FROM jobs_job
"""


@dataclass(frozen=True)
class Event:
    id: int
    at: datetime
    from_state: str
    to_state: str
    attempt: int
    worker: str
    message: str = ""


@dataclass(frozen=True)
class Effect:
    at: datetime
    attempt: int
    worker: str


@dataclass
class Execution:
    id: str
    state: str
    attempt: int
    worker: str
    result: Any
    events: list[Event]
    effects: list[Effect] = field(default_factory=list)
    scheduled_for: datetime | None = None


@dataclass
class Run:
    start: Event
    end: Event | None = None
    effects: list[Effect] = field(default_factory=list)

    @property
    def taken_away(self) -> bool:
        """Ended by someone other than its handler's outcome: reclaimed, timed out, cancelled by
        force or released. Its handler may have made its effect before it was stopped."""
        return self.end is not None and self.end.to_state not in (SUCCEEDED, FAILED)


@dataclass
class Figures:
    executions: int = 0
    states: Counter = field(default_factory=Counter)
    moves: Counter = field(default_factory=Counter)  # (from, to) of every event
    effects: int = 0
    duplicate_effects: int = 0
    unexplained_effects: int = 0
    cron_fires: int = 0
    cron_doubled: int = 0
    cron_skipped: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def reclaims(self) -> int:
        return self.moves["RUNNING", "FAILED_WORKER_LOST"]


def runs_of(execution: Execution) -> list[Run]:
    runs: list[Run] = []
    for event in execution.events:
        if (event.from_state, event.to_state) == ("QUEUED", "RUNNING"):
            runs.append(Run(start=event))
        elif event.from_state == "RUNNING" and event.to_state != "RUNNING" and runs and runs[-1].end is None:
            runs[-1].end = event
    return runs


def check_history(execution: Execution) -> list[str]:
    """The events are one walk through the state machine that ends where the row is."""
    problems = []
    previous = ""
    for event in execution.events:
        move = (event.from_state, event.to_state)
        if event.from_state != previous:
            problems.append(f"event {event.id} moves from {event.from_state or '-'}, the row was in {previous or '-'}")
        elif previous in TERMINAL:
            problems.append(f"event {event.id} ({event.from_state} → {event.to_state}) after a terminal state")
        elif previous == "" and event.to_state != "PENDING":
            problems.append(f"event {event.id} creates the execution in {event.to_state}")
        elif previous and move not in NOT_MOVES and event.to_state not in TRANSITIONS[previous]:
            problems.append(f"event {event.id} is a forbidden move {event.from_state} → {event.to_state}")
        previous = event.to_state
    if previous != execution.state:
        problems.append(f"the history ends in {previous or '-'} but the row is {execution.state}")
    return problems


def audit_execution(execution: Execution, *, allowed: frozenset[str], may_run: bool, figures: Figures) -> None:
    """Apply every rule above to one execution of a job whose handler is soak-effect. `allowed`:
    the final states its kind may end in; `may_run`: whether it may have started at all."""
    say = figures.violations.append
    name = f"execution {execution.id}"
    figures.executions += 1
    figures.states[execution.state] += 1
    figures.moves.update((e.from_state, e.to_state) for e in execution.events)
    figures.effects += len(execution.effects)

    if execution.state not in allowed:
        say(f"{name} ended {execution.state}, expected {' or '.join(sorted(allowed))} (lost)")
    for problem in check_history(execution):
        say(f"{name}: {problem} (stale or lost write)")

    runs = runs_of(execution)
    if runs and not may_run:
        say(f"{name} was started {len(runs)} time(s) although it was cancelled before it was due")
    for effect in execution.effects:
        # A process runs one handler at a time; should it have run one attempt twice (a run given
        # back without a new attempt), the effect is its latest run's before the effect.
        own = [run for run in runs if (run.start.worker, run.start.attempt) == (effect.worker, effect.attempt)]
        if not own:
            say(f"{name}: an effect of attempt {effect.attempt} on {effect.worker}, which never started it")
            continue
        owner = max((run for run in own if run.start.at <= effect.at), key=lambda run: run.start.at, default=own[-1])
        owner.effects.append(effect)

    succeeded = [run for run in runs if run.end is not None and run.end.to_state == SUCCEEDED]
    if len(succeeded) > 1:
        say(f"{name} completed {len(succeeded)} times (attempts {', '.join(str(r.start.attempt) for r in succeeded)})")
    for run in runs:
        what = f"{name}: the run of attempt {run.start.attempt} on {run.start.worker}"
        if len(run.effects) > 1:
            say(f"{what} made {len(run.effects)} effects (two deliveries held one lease)")
        if run.end is None:
            continue
        if run.end.to_state == SUCCEEDED:
            if len(run.effects) != 1:
                say(f"{what} was recorded SUCCEEDED with {len(run.effects)} effects")
        elif run.end.to_state == FAILED:
            if run.effects:
                say(f"{what} failed after its effect (the handler only fails before it)")
            if match := FAILURE_MESSAGE.search(run.end.message):
                if (int(match[1]), match[2]) != (run.start.attempt, run.start.worker):
                    say(f"{what} was recorded FAILED with the error of attempt {match[1]} on {match[2]} (stale write)")
    if execution.state == SUCCEEDED and succeeded:
        last = succeeded[-1].start
        result = execution.result if isinstance(execution.result, dict) else {}
        if (result.get("attempt"), result.get("worker")) != (last.attempt, last.worker) or (
            execution.attempt,
            execution.worker,
        ) != (last.attempt, last.worker):
            say(
                f"{name}: the row (attempt {execution.attempt} on {execution.worker}) holds the result"
                f" {execution.result!r}, but its last run was attempt {last.attempt} on {last.worker} (a stale write)"
            )

    extra = max(0, len(execution.effects) - 1)
    explained = sum(len(run.effects) for run in runs if run.taken_away)
    figures.duplicate_effects += extra
    if extra > explained:
        figures.unexplained_effects += extra - explained
        say(f"{name} made {len(execution.effects)} effects, of which {explained} by runs that were taken away")


def audit_cron(
    *,
    job_id: str,
    schedule: str,
    timezone: str,
    created_at: datetime,
    cancelled_at: datetime,
    fires: list[Execution],
    figures: Figures,
) -> None:
    """A cron job's fires (its SCHEDULE executions) are exactly its schedule's from the first
    fire after its creation up to the fire that was pending when it was cancelled; each ran
    (audit_execution) or was cancelled with the job before it started."""
    say = figures.violations.append
    name = f"cron job {job_id} ({schedule!r} in {timezone})"
    times = Counter(fire.scheduled_for for fire in fires)
    figures.cron_fires += len(fires)
    for when, count in times.items():
        if count > 1:
            figures.cron_doubled += count - 1
            say(f"{name}: the fire of {when.isoformat()} was materialised {count} times")
    if not times:
        say(f"{name} has no fire at all")
        return
    # The first fire is computed from the create's clock reading, a moment before created_at.
    firsts = {
        cron.next_fire(schedule, timezone, when, seed=str(job_id)) for when in (created_at - ONE_SECOND, created_at)
    }
    first, last = min(times), max(times)
    if first not in firsts:
        say(f"{name}: its first fire is {first.isoformat()}, expected {min(firsts).isoformat()}")
    expected = {first, *cron.fires_between(schedule, timezone, first, last, seed=str(job_id))}
    # Everything due before the cancel was materialised: the fire after the last one is later.
    ahead = cron.next_fire(schedule, timezone, last, seed=str(job_id))
    if ahead <= cancelled_at:
        expected |= {ahead, *cron.fires_between(schedule, timezone, ahead, cancelled_at, seed=str(job_id))}
    missing = sorted(expected - set(times))
    figures.cron_skipped += len(missing)
    if missing:
        say(f"{name}: fires skipped: {', '.join(m.isoformat() for m in missing[:5])}{' …' if len(missing) > 5 else ''}")
    for extra in sorted(set(times) - expected):
        say(f"{name}: a fire at {extra.isoformat()} that the schedule does not have")
    for fire in fires:
        audit_execution(fire, allowed=frozenset({SUCCEEDED, CANCELLED}), may_run=True, figures=figures)
        if fire.state == CANCELLED and fire.events and fire.events[-1].from_state == "RUNNING":
            say(f"{name}: the fire of {fire.scheduled_for.isoformat()} was cancelled while it ran")
