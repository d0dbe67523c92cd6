"""Writes made from the dashboard. Each action calls the same service the API calls, and each
leaves one audit row saying who did what to which object, when, and how it ended. The actions
live with their pages (dashboard/jobs/actions.py, dashboard/executions/actions.py,
dashboard/fleet/actions.py, dashboard/dead_letter/actions.py); this is what they share: the
wrapper that runs an action with its audit row (`audited_action`), the refusal it raises, and
the rows of attempts that never reached an action (a form that did not validate, an object not
found).

The audit log's writer lives in audit/services.py (the API and the admin record through it too);
Actor, Target, audit_record and REFUSALS are re-exported here under the names the dashboard's
code has always used. A successful action and its audit row commit in one transaction; a refused
or failed action is recorded after its transaction rolled back, so the log also shows what was
attempted.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from rest_framework.exceptions import ValidationError

from audit.models import AuditOutcome
from audit.services import REFUSALS, Actor, Target, audit_record, audited, error_lines

__all__ = ["REFUSALS", "Actor", "Target", "audit_record"]

T = TypeVar("T")


class ActionRefused(Exception):
    """The service refused the action (the object's state forbids it); the message says why."""


def audited_action(
    *,
    actor: Actor,
    action: str,
    target: Target,
    now: datetime,
    run: Callable[[], T],
    describe: Callable[[T], str] = lambda _: "",
    target_of: Callable[[T], Target] | None = None,
    request_id=None,
) -> T:
    """Run `run` and its audit row in one transaction (audit.services.audited); a refusal or an
    input that did not validate comes out as ActionRefused, with the reason the log recorded."""
    try:
        return audited(
            actor=actor,
            action=action,
            target=target,
            now=now,
            run=run,
            describe=describe,
            target_of=target_of,
            request_id=request_id,
        )
    except ValidationError as exc:
        # Input checked inside the action (a restored version's definition): nothing was written.
        raise ActionRefused("; ".join(error_lines(exc.detail))) from exc
    except REFUSALS as exc:
        raise ActionRefused(str(exc)) from exc


def audit_invalid(*, actor: Actor, action: str, target: Target, errors: Any, now: datetime) -> None:
    """A form that did not validate: nothing was written but the attempt."""
    audit_record(actor=actor, action=action, target=target, outcome=AuditOutcome.INVALID, now=now, detail=str(errors))


def audit_not_found(*, actor: Actor, action: str, target_type: str, target_id: str, now: datetime) -> None:
    """An action on an object that does not exist in the caller's scope. The row has no tenant,
    so only staff see it: it must not tell a tenant that someone else's object exists."""
    audit_record(
        actor=actor,
        action=action,
        target=Target(type=target_type, id=str(target_id)[:64]),
        outcome=AuditOutcome.NOT_FOUND,
        now=now,
    )
