"""The job state machine: the states, the allowed moves, and the one function that writes them.

ACTIVE     fires as scheduled. Created so; `resume` brings a PAUSED job back.
PAUSED     nothing of it is dispatched; its pending execution waits (the claim skips it).
CANCELLED  terminal: no future fires; its pending executions were cancelled with it.
COMPLETED  terminal, one-off jobs only: its execution reached a terminal state.
"""

from datetime import datetime

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


def sources_of(target: JobState) -> list[JobState]:
    return [source for source, targets in TRANSITIONS.items() if target in targets]


def job_transition(*, job_id, target: JobState, now: datetime, **changes) -> bool:
    """Move a job to `target` from any state allowed to reach it, as one conditional update.

    Returns False when the job is in no such state (it was moved by someone else first); the
    caller decides whether that is an error.
    """
    from jobs.models import Job

    updated = Job.objects.filter(pk=job_id, state__in=sources_of(target)).update(
        state=target, updated_at=now, **changes
    )
    return updated == 1
