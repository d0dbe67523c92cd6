"""What every named transition is made of: the declaration of the moves it makes (checked against
the table in executions/states.py when it is declared, by the machine's `transition`), and one
conditional move of one execution with its event. executions/transitions.py and
executions/steps.py declare the named transitions with these; nothing else writes an execution's
state."""

from datetime import datetime
from typing import Any

from executions import observers
from executions.states import EXECUTION, ExecutionState
from executions.storable import storable_text
from store import store

S = ExecutionState

# The execution machine's (machines/machine.py), under the names the transitions use: `@moves`
# declares a named transition, NAMED holds each one's sources and target, `accepts` refuses a
# source it does not take.
moves = EXECUTION.transition
NAMED = EXECUTION.named
accepts = EXECUTION.accepts


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
