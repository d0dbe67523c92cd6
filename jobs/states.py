"""The job state machine: the states and the allowed moves. jobs/transitions.py writes them.

ACTIVE     fires as scheduled. Created so; `resume` brings a PAUSED job back.
PAUSED     nothing of it is dispatched; its pending execution waits (the claim skips it).
CANCELLED  terminal: no future fires; its pending executions were cancelled with it.
COMPLETED  terminal, one-off jobs only: its execution reached a terminal state.
"""

from django.db import models


class JobState(models.TextChoices):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"


TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.ACTIVE: frozenset({JobState.PAUSED, JobState.CANCELLED, JobState.COMPLETED}),
    JobState.PAUSED: frozenset({JobState.ACTIVE, JobState.CANCELLED}),
    JobState.CANCELLED: frozenset(),
    JobState.COMPLETED: frozenset({JobState.ACTIVE}),
}
TERMINAL = frozenset({JobState.CANCELLED, JobState.COMPLETED})


class InvalidJobTransition(Exception):
    def __init__(self, job_id, current: str, target: str, message: str = "") -> None:
        super().__init__(message or f"job {job_id} cannot go from {current} to {target}")
        self.current = current
        self.target = target
