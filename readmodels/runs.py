"""What a run is, as the API and the dashboard show it: the runs a scope may see, and a run's state
derived from its steps' (a run stores none of its own; scheduling/runs.py makes runs)."""

from collections.abc import Iterable

from django.db.models import QuerySet

from executions.models import Run
from executions.states import TERMINAL, ExecutionState

S = ExecutionState


def run_list(*, scope: list[int] | None) -> QuerySet[Run]:
    """The runs a scope may see (None: every tenant's)."""
    found = Run.objects.all()
    return found if scope is None else found.filter(tenant_id__in=scope)


# What a run's state can be (run_state), as the API's schema names them.
RUN_STATES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")
# Those of a run that has not ended: a step can still run.
UNFINISHED_RUN_STATES = frozenset({"PENDING", "RUNNING"})


def step_begun(state: str, attempt: int) -> bool:
    """Whether a step has begun: it is past waiting for its first attempt, i.e. neither BLOCKED
    (its upstream steps run first) nor PENDING on attempt 1 (waiting for its time, or for
    admission). What readmodels.last_runs calls begun, in SQL."""
    return not (state == S.BLOCKED or (state == S.PENDING and attempt == 1))


def run_state(steps: Iterable[tuple[str, int]]) -> str:
    """A run's state from its steps' (state, attempt): PENDING while none has begun (a cron
    job's run made for tomorrow, a run waiting for a slot), RUNNING while one has and any can
    still run; else FAILED if a step ended DEAD (or was discarded since), CANCELLED if one was
    cancelled, SUCCEEDED when all succeeded."""
    steps = list(steps)
    states = [state for state, _ in steps]
    if any(state not in TERMINAL for state in states):
        return "RUNNING" if any(step_begun(state, attempt) for state, attempt in steps) else "PENDING"
    if S.DEAD in states or S.DISCARDED in states:
        return "FAILED"
    if S.CANCELLED in states:
        return "CANCELLED"
    return "SUCCEEDED"
