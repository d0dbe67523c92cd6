"""The execution state machine: the states, the allowed moves, and the functions that write them.

BLOCKED             a workflow step waiting for its upstream steps (scheduling/runs.py): released
                    to PENDING, due now, in the transaction that records the last upstream's
                    success; CANCELLED when an upstream ends DEAD or CANCELLED, and BLOCKED again
                    when that upstream is re-driven.
PENDING             waits for `available_at`. Made by job creation, a cron fire, a retry or a
                    re-drive; the dispatcher's claim is the only way out except cancellation.
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
Every write of `state` is one of the named transitions in executions/transitions.py, each of
which declares the moves of this table it makes; executions/tests/test_transition_table.py checks that every
move of the table is made by one and that every other is refused.
"""

from django.db import models


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
TRANSITIONS: dict[ExecutionState, frozenset[ExecutionState]] = {
    S.BLOCKED: frozenset({S.PENDING, S.CANCELLED}),
    S.PENDING: frozenset({S.QUEUED, S.CANCELLED}),
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.FAILED_WORKER_LOST, S.CANCELLED, S.PENDING}),
    S.FAILED: frozenset({S.PENDING, S.DEAD}),
    S.TIMED_OUT: frozenset({S.PENDING, S.DEAD}),
    S.FAILED_WORKER_LOST: frozenset({S.PENDING, S.DEAD}),
    S.DEAD: frozenset({S.PENDING, S.DISCARDED}),
    S.CANCELLED: frozenset({S.PENDING, S.BLOCKED}),
    S.SUCCEEDED: frozenset(),
    S.DISCARDED: frozenset(),
}
TERMINAL = frozenset({S.SUCCEEDED, S.CANCELLED, S.DEAD, S.DISCARDED})
# Failure states that the retry policy resolves within the same transaction that entered them.
RETRYABLE = frozenset({S.FAILED, S.TIMED_OUT, S.FAILED_WORKER_LOST})
ACTIVE = frozenset({S.QUEUED, S.RUNNING})
REDRIVABLE = frozenset({S.DEAD, S.CANCELLED, S.FAILED})


class InvalidTransition(Exception):
    def __init__(self, source: str, target: str, why: str = "") -> None:
        super().__init__(f"an execution cannot go from {source} to {target}" + (f": {why}" if why else ""))


def check(source: ExecutionState, target: ExecutionState) -> None:
    if target not in TRANSITIONS[ExecutionState(source)]:
        raise InvalidTransition(source, target)
