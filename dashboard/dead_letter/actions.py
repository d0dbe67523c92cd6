"""The dashboard's actions on a whole error group of the dead letter (readmodels/dead_letter.py):
retry (re-drive) or discard every DEAD execution of one fingerprint. Audited as the bulk retry
is: one audit row per execution, all of one request sharing a request id.

An action is one pass over the executions that were in the group when it began, each tried at
most once (readmodels.dead_letter.group_act): a group can hold tens of thousands, so a request
works through its pass in batches for a bounded time (readmodels.dead_letter.ACTION_SECONDS) and
answers with how many of the pass remain; the page offers to continue that pass. Nothing is left
half-done: each batch commits with its audit rows.
"""

import uuid
from datetime import datetime

from django.db import transaction

from audit.models import AuditOutcome
from dashboard.executions.actions import executions_retry_audited
from dashboard.services import Actor, Target, audit_record
from executions.models import Execution
from readmodels.dead_letter import GroupAction, Pass, group_act
from scheduling.execution_changes import executions_discard

GROUP_ACTIONS = ("retry", "discard")


def dead_letter_group_act(
    *, actor: Actor, scope: list[int] | None, fingerprint: str, action: str, now: datetime, resume: Pass | None = None
) -> GroupAction:
    """Retry or discard the group's DEAD executions in the caller's scope, oldest first, for a
    bounded time: a new pass, or the pass `resume` continues. Returns what was done, how many of
    the pass remain, and how to continue it."""
    request_id = uuid.uuid4()
    if action == "retry":

        def act(batch: list[Execution]) -> tuple[int, int]:
            result = executions_retry_audited(actor=actor, executions=batch, now=now, request_id=request_id)
            return len(result.done), len(result.refused)

    elif action == "discard":

        def act(batch: list[Execution]) -> tuple[int, int]:
            return executions_discard_audited(actor=actor, executions=batch, now=now, request_id=request_id)

    else:
        raise ValueError(f"unknown group action {action!r}")
    return group_act(scope=scope, fingerprint=fingerprint, act=act, resume=resume)


def executions_discard_audited(
    *, actor: Actor, executions: list[Execution], now: datetime, request_id: uuid.UUID
) -> tuple[int, int]:
    """DEAD → DISCARDED for the batch in one transaction with an audit row per execution moved;
    one whose state changed under us (re-driven meanwhile) is audited as refused. Returns
    (discarded, refused)."""
    with transaction.atomic():
        moved = executions_discard(executions=executions, now=now, reason=f"discarded by {actor.username}")
        for execution in executions:
            if execution.pk in moved:
                audit_record(
                    actor=actor,
                    action="execution.discard",
                    target=Target.of_execution(execution),
                    outcome=AuditOutcome.OK,
                    now=now,
                    detail=f"error group {execution.error_fingerprint or '(none)'}",
                    request_id=request_id,
                )
    refused = [e for e in executions if e.pk not in moved]
    for execution in refused:
        audit_record(
            actor=actor,
            action="execution.discard",
            target=Target.of_execution(execution),
            outcome=AuditOutcome.REFUSED,
            now=now,
            detail="no longer DEAD",
            request_id=request_id,
        )
    return len(moved), len(refused)
