"""What every named transition is made of: the declaration of the moves it makes (checked against
the table in executions/states.py when it is declared), and one conditional move of one execution
with its event. executions/transitions.py and executions/steps.py declare the named transitions
with these; nothing else writes an execution's state."""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from executions import observers
from executions.states import ExecutionState, InvalidTransition, check
from executions.storable import storable_text
from store import store

S = ExecutionState
F_ = TypeVar("F_", bound=Callable[..., Any])

# Per named transition: the source states it accepts and the state it moves to.
NAMED: dict[str, tuple[frozenset[ExecutionState], ExecutionState]] = {}


def moves(sources: Sequence[ExecutionState], target: ExecutionState) -> Callable[[F_], F_]:
    """Declare what a named transition moves; a move the table does not allow fails at import."""
    for source in sources:
        check(source, target)

    def declare(function: F_) -> F_:
        NAMED[function.__name__] = (frozenset(sources), target)
        return function

    return declare


def accepts(name: str, source: ExecutionState) -> None:
    if source not in NAMED[name][0]:
        raise InvalidTransition(source, NAMED[name][1])


# What the next attempt starts without: the last attempt's run belongs to the events now. Its
# error stays, as "the last error", until the next attempt has an outcome.
FRESH_ATTEMPT: dict[str, Any] = {
    "lease_expires_at": None,
    "timeout_at": None,
    "republish_at": None,
    "cancel_requested_at": None,
    "started_at": None,
    "heartbeat_at": None,
    "finished_at": None,
    "worker_id": "",
}


def move_one(
    *,
    execution_id: Any,
    source: ExecutionState,
    target: ExecutionState,
    now: datetime,
    lease_token: int | None = None,
    message: str = "",
    **values: Any,
) -> bool:
    change = store().move(
        execution_id=execution_id,
        source=source,
        target=target,
        now=now,
        values=values,
        lease_token=lease_token,
        message=storable_text(message),
    )
    if change is None:
        return False
    observers.announce([change])
    return True
