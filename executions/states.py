"""The execution state machine: the states, the allowed moves, and the functions that write them.

BLOCKED             a workflow step waiting for its upstream steps (scheduling/runs.py): released
                    to PENDING, due now, in the transaction that records the last upstream's
                    success; CANCELLED when an upstream ends DEAD or CANCELLED, and BLOCKED again
                    when that upstream is re-driven. Or a fire of a concurrencyPolicy BUFFER_ONE
                    job waiting for the job's run in progress to end (`buffer`, from PENDING or
                    QUEUED, by the dispatcher): released to PENDING, due now, by the
                    dispatcher's next pass after that run ends (`unbuffer`, or a workflow run's
                    roots by `release_steps`).
PENDING             waits for `available_at`. Made by job creation, a cron fire, a retry or a
                    re-drive; the dispatcher's claim is the only way out except cancellation (and
                    a BUFFER_ONE workflow run's unclaimed steps, buffered with the run).
QUEUED              claimed by a dispatcher under a new lease token and published to its pool's
                    queue. A worker starts it; the sweeper re-publishes it if none does in time.
RUNNING             a worker holds the lease and heartbeats. The worker records the outcome;
                    the sweeper takes it away when the lease expires or the timeout passes. A
                    worker that is shutting down releases it back to PENDING ("released").
SUCCEEDED           terminal: the handler returned.
FAILED              the handler raised. Transient: the retry policy moves it on at once to
                    PENDING (attempt + 1) or DEAD.
TIMED_OUT           ran past the job's timeout. Transient like FAILED.
FAILED_WORKER_LOST  the lease expired with no outcome (the worker died or froze). Transient.
CANCELLED           terminal: cancelled before it ran, or stopped while running.
DEAD                terminal: attempts exhausted. The dead-letter view lists these.
DISCARDED           terminal: a DEAD execution an operator discarded from the dead letter
                    (`discard_dead_many`, one error group at a time): it stays in the history,
                    counted as the DEAD it was (its fold, executions/tallies.py), and is never
                    re-driven.

DEAD, CANCELLED and FAILED go back to PENDING only by an explicit re-drive ("retry"); a CANCELLED
step goes back to BLOCKED only when the re-drive of its upstream step re-opens its run. RUNNING goes
back to PENDING only by a release: its worker is shutting down and stopped the handler short, so
the same attempt is due again at once (not a failure: no attempt is spent, and nothing waits for
the lease to expire).
Every write of `state` is one of the named transitions in executions/transitions.py and
executions/steps.py, each of which declares the moves of this table it makes (`@moves`, the
machine's `transition`: machines/machine.py). tests_architecture/test_state_machines.py checks
this table as it checks every machine's, and that nothing else writes the state;
executions/tests/test_transition_table.py applies every named transition to an execution in each
state, on both stores: it moves the states it accepts and refuses every other.
"""

from django.db import models

from machines import InvalidMove, Machine


class ExecutionState(models.TextChoices):
    BLOCKED = "BLOCKED"
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    FAILED_WORKER_LOST = "FAILED_WORKER_LOST"
    CANCELLED = "CANCELLED"
    DEAD = "DEAD"
    DISCARDED = "DISCARDED"


S = ExecutionState


class InvalidTransition(InvalidMove):
    def __init__(self, source: str, target: str, why: str = "") -> None:
        super().__init__(f"an execution cannot go from {source} to {target}" + (f": {why}" if why else ""))


EXECUTION: Machine[ExecutionState] = Machine(
    model="executions.Execution",
    states=ExecutionState,
    moves={
        S.BLOCKED: {S.PENDING, S.CANCELLED},
        S.PENDING: {S.QUEUED, S.CANCELLED, S.BLOCKED},
        S.QUEUED: {S.RUNNING, S.CANCELLED, S.BLOCKED},
        S.RUNNING: {S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.FAILED_WORKER_LOST, S.CANCELLED, S.PENDING},
        S.FAILED: {S.PENDING, S.DEAD},
        S.TIMED_OUT: {S.PENDING, S.DEAD},
        S.FAILED_WORKER_LOST: {S.PENDING, S.DEAD},
        S.DEAD: {S.PENDING, S.DISCARDED},
        S.CANCELLED: {S.PENDING, S.BLOCKED},
        S.SUCCEEDED: set(),
        S.DISCARDED: set(),
    },
    initial={S.PENDING, S.BLOCKED},
    terminal={S.SUCCEEDED, S.CANCELLED, S.DEAD, S.DISCARDED},
    # An operator's re-drive, of the execution or of the upstream step that re-opens its run.
    reopening={(S.DEAD, S.PENDING), (S.CANCELLED, S.PENDING), (S.CANCELLED, S.BLOCKED)},
    # The named transitions, what they are made of, the re-timing of what has not started, and
    # the store that runs their statements.
    writers=[
        "executions.transitions",
        "executions.steps",
        "executions.buffering",
        "executions.moves",
        "executions.retiming",
        "store",
    ],
    # Its time is the state machine's too: the claim reads it, and only these modules move it.
    guarded=["state", "available_at"],
    refuse=InvalidTransition,
)
TRANSITIONS = EXECUTION.moves
TERMINAL = EXECUTION.terminal
# Failure states that the retry policy resolves within the same transaction that entered them.
RETRYABLE = frozenset({S.FAILED, S.TIMED_OUT, S.FAILED_WORKER_LOST})
ACTIVE = frozenset({S.QUEUED, S.RUNNING})
REDRIVABLE = frozenset({S.DEAD, S.CANCELLED, S.FAILED})
check = EXECUTION.check


class BackfillState(models.TextChoices):
    """A backfill's life (scheduling/backfills.py; executions/backfills.py writes it).

    RUNNING    made so: the sweeper's backfill service releases its fires, a few at a time.
    DONE       terminal: every fire was released and every run it started has ended.
    CANCELLED  terminal: cancelled; its fires not released never will be, its runs not started
               were cancelled with it.
    """

    RUNNING = "RUNNING"
    DONE = "DONE"
    CANCELLED = "CANCELLED"


BACKFILL: Machine[BackfillState] = Machine(
    model="executions.Backfill",
    states=BackfillState,
    moves={
        BackfillState.RUNNING: {BackfillState.DONE, BackfillState.CANCELLED},
        BackfillState.DONE: set(),
        BackfillState.CANCELLED: set(),
    },
    initial={BackfillState.RUNNING},
    terminal={BackfillState.DONE, BackfillState.CANCELLED},
    writers=["executions.backfills"],
)
