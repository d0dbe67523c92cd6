"""The job state machine: the states and the allowed moves. jobs/transitions.py writes them.

ACTIVE     fires as scheduled. Created so; `resume` brings a PAUSED job back.
PAUSED     nothing of it is dispatched; its pending execution waits (the claim skips it).
CANCELLED  terminal: no future fires; its pending executions were cancelled with it.
COMPLETED  one-off jobs only: none of its executions can run any more. Read, not stored: the row
           of such a job stays ACTIVE, and executions/standing.py reads COMPLETED from its
           executions (a trigger or a re-drive gives it one that can run, and it reads ACTIVE
           again). Writing it made every one-off pay a second version of its row and of each of
           its index entries as its run ended (issue 36).
"""

from django.db import models

from machines import InvalidMove, Machine


class JobState(models.TextChoices):
    """The states a reader sees (the API's `state`, the pages, the filters)."""

    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"


class StoredJobState(models.TextChoices):
    """The states a job's row holds: COMPLETED is read (executions/standing.py)."""

    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"


JOB: Machine[StoredJobState] = Machine(
    model="jobs.Job",
    states=StoredJobState,
    moves={
        StoredJobState.ACTIVE: {StoredJobState.PAUSED, StoredJobState.CANCELLED},
        StoredJobState.PAUSED: {StoredJobState.ACTIVE, StoredJobState.CANCELLED},
        StoredJobState.CANCELLED: set(),
    },
    # Created ACTIVE; created PAUSED is created ACTIVE and paused in the same transaction.
    initial={StoredJobState.ACTIVE},
    terminal={StoredJobState.CANCELLED},
    writers=["jobs.transitions"],
)
TRANSITIONS = JOB.moves
TERMINAL = JOB.terminal
# The states in which a job, as its readers see it, has ended: nothing of it runs any more, and
# its definition no longer changes.
ENDED = frozenset({JobState.CANCELLED, JobState.COMPLETED})


class InvalidJobTransition(InvalidMove):
    def __init__(self, job_id, current: str, target: str, message: str = "") -> None:
        super().__init__(message or f"job {job_id} cannot go from {current} to {target}")
        self.current = current
        self.target = target
