"""The job state machine: the states and the allowed moves. jobs/transitions.py writes them.

ACTIVE     fires as scheduled. Created so; `resume` brings a PAUSED job back.
PAUSED     nothing of it is dispatched; its pending execution waits (the claim skips it).
CANCELLED  terminal: no future fires; its pending executions were cancelled with it.
COMPLETED  terminal, one-off jobs only: its execution reached a terminal state. A trigger or the
           re-drive of its run re-opens it (`reopen`).
"""

from django.db import models

from machines import InvalidMove, Machine


class JobState(models.TextChoices):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"


JOB: Machine[JobState] = Machine(
    model="jobs.Job",
    states=JobState,
    moves={
        JobState.ACTIVE: {JobState.PAUSED, JobState.CANCELLED, JobState.COMPLETED},
        JobState.PAUSED: {JobState.ACTIVE, JobState.CANCELLED},
        JobState.CANCELLED: set(),
        JobState.COMPLETED: {JobState.ACTIVE},
    },
    # Created ACTIVE; created PAUSED is created ACTIVE and paused in the same transaction.
    initial={JobState.ACTIVE},
    terminal={JobState.CANCELLED, JobState.COMPLETED},
    reopening={(JobState.COMPLETED, JobState.ACTIVE)},
    # The job's named transitions, and the store, whose move that ends a one-off job's last run
    # settles the job in its own statement (jobs_complete, on PostgreSQL).
    writers=["jobs.transitions", "store"],
)
TRANSITIONS = JOB.moves
TERMINAL = JOB.terminal


class InvalidJobTransition(InvalidMove):
    def __init__(self, job_id, current: str, target: str, message: str = "") -> None:
        super().__init__(message or f"job {job_id} cannot go from {current} to {target}")
        self.current = current
        self.target = target
