"""The executions pages' actions, audited (dashboard.services.audited_action): cancel or re-drive
one execution, re-drive a selection (the dead letter's "Retry selected", and its groups' retry),
each through the service the API calls."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from dashboard.services import ActionRefused, Actor, Target, audited_action
from executions.models import Execution
from scheduling.execution_changes import execution_cancel, execution_redrive


def execution_cancel_audited(*, actor: Actor, execution: Execution, now: datetime) -> str:
    """Cancel through scheduling.execution_changes.execution_cancel: CANCELLED at once, or RUNNING with a
    cancel request the worker honours at its next heartbeat."""
    return audited_action(
        actor=actor,
        action="execution.cancel",
        target=Target.of_execution(execution),
        now=now,
        run=lambda: execution_cancel(execution=execution, now=now, reason=f"cancelled by {actor.username}"),
        describe=lambda state: "cancelled" if state == "CANCELLED" else "cancel requested (running)",
    )


def execution_retry_audited(*, actor: Actor, execution: Execution, now: datetime, request_id=None) -> Execution:
    """Re-drive a DEAD, FAILED or CANCELLED execution through execution_redrive."""
    return audited_action(
        actor=actor,
        action="execution.retry",
        target=Target.of_execution(execution),
        now=now,
        run=lambda: execution_redrive(execution=execution, now=now, reason=f"re-driven by {actor.username}"),
        describe=lambda e: f"attempt {e.attempt} pending",
        request_id=request_id,
    )


@dataclass
class BulkResult:
    done: list[Execution]
    refused: list[tuple[Execution, str]]


def executions_retry_audited(
    *, actor: Actor, executions: list[Execution], now: datetime, request_id: uuid.UUID | None = None
) -> BulkResult:
    """Re-drive several executions, each in its own transaction with its own audit row (sharing
    one request id, a new one unless given): one that cannot be re-driven does not hold back the
    others."""
    request_id = request_id or uuid.uuid4()
    result = BulkResult(done=[], refused=[])
    for execution in executions:
        try:
            result.done.append(
                execution_retry_audited(actor=actor, execution=execution, now=now, request_id=request_id)
            )
        except ActionRefused as exc:
            result.refused.append((execution, str(exc)))
    return result
