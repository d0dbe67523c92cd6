"""The audit log's writer, for every actor: the dashboard (dashboard/services.py), the API
(web/audit.py), the admin (web/admin.py) and the command line (web/cli/, worker/beat_import.py)
record through these.

A successful action and its audit row commit in one transaction (`audited`): there is never an
effect without its row, nor a row claiming an effect that was rolled back. A refused or failed
action is recorded after its transaction rolled back, so the log also shows what was attempted.
"""

import getpass
import os
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db import transaction
from django.http import Http404
from rest_framework.exceptions import ValidationError

from audit.models import ActorKind, AuditEntry, AuditOutcome
from executions.states import InvalidTransition
from jobs.models import Job
from jobs.rows import new_row
from jobs.states import InvalidJobTransition
from scheduling.backfills import BackfillEnded
from scheduling.job_creation import QuotaExceeded
from store import store

T = TypeVar("T")
# What the services raise when an object's state forbids the action: a refusal, not a fault.
REFUSALS = (InvalidJobTransition, InvalidTransition, QuotaExceeded, BackfillEnded)
# What PostgreSQL cannot store in text (a NUL, a lone surrogate), as web/json_input.py refuses it
# on the way in; here it is written escaped, so a refused form is still audited, not a 500.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


# Who hears that a job was changed (an OK row about a job): the dashboard's live feed subscribes
# (dashboard/apps.py) to read at once instead of at its next poll. Told after commit; each
# listener must be cheap and never raise.
JobChangeListener = Callable[[list[tuple[Any, int | None]]], None]
_job_change_listeners: list[JobChangeListener] = []


def on_job_change(listener: JobChangeListener) -> None:
    if listener not in _job_change_listeners:
        _job_change_listeners.append(listener)


def _announce(rows: list[AuditEntry]) -> None:
    changed = [(row.job_id, row.tenant_id) for row in rows if row.outcome == AuditOutcome.OK and row.job_id]
    if changed and _job_change_listeners:
        transaction.on_commit(lambda: [listener(changed) for listener in _job_change_listeners])


def storable(text: str) -> str:
    return _UNSTORABLE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


@dataclass(frozen=True)
class Actor:
    """Who acts, as the audit log records it: a user (by username), an API token (by the line
    web.authentication.actor_of makes of it) or the operating system's user running a command
    (cli_actor), and through what."""

    user_id: int | None
    username: str
    source_ip: str | None = None
    kind: str = ActorKind.DASHBOARD

    @classmethod
    def of(cls, request) -> "Actor":
        """A signed-in user of the dashboard."""
        user = request.user
        return cls(user_id=user.pk, username=user.get_username(), source_ip=client_ip(request))

    @property
    def label(self) -> str:
        """How a job's version names the author of a change made here."""
        if self.kind == ActorKind.API:
            return self.username  # already "token deploy (tw_ab12) of acme" or "user ada"
        return f"{self.kind} {self.username}"


def cli_actor() -> Actor:
    """Who runs a management command: the operating system's user, as getpass finds them
    ($LOGNAME, $USER, … or the password database). A container may run as a uid that neither
    names: then the uid, so the row still says who."""
    try:
        username = getpass.getuser()
    except (KeyError, OSError):  # KeyError before Python 3.13, OSError since
        username = f"uid {os.getuid()}"
    return Actor(user_id=None, username=username, kind=ActorKind.CLI)


def client_ip(request) -> str | None:
    # REMOTE_ADDR: behind a proxy, daphne's --proxy-headers puts the client's there (README).
    return request.META.get("REMOTE_ADDR") or None


@dataclass(frozen=True)
class Target:
    type: str  # "job" | "execution" | "run" | "alert_rule" | "tenant" | "token" | …
    id: str = ""
    label: str = ""
    job_id: Any = None
    tenant_id: int | None = None

    @classmethod
    def of_job(cls, job) -> "Target":
        return cls(type="job", id=str(job.pk), label=job.name, job_id=job.pk, tenant_id=job.tenant_id)

    @classmethod
    def of_execution(cls, execution) -> "Target":
        label = f"{execution.job.name} #{execution.attempt}" if execution.job_id else ""
        return cls(
            type="execution",
            id=str(execution.pk),
            label=label,
            job_id=execution.job_id,
            tenant_id=execution.tenant_id,
        )


def entry(
    *,
    actor: Actor,
    action: str,
    target: Target,
    outcome: str,
    now: datetime,
    detail: str = "",
    request_id=None,
) -> AuditEntry:
    """One row, unsaved (audit_record saves it; a bulk writer saves many in one INSERT)."""
    return new_row(
        AuditEntry,
        {
            "at": now,
            "actor_id": actor.user_id,
            "actor": storable(actor.username)[:150],
            "actor_kind": actor.kind,
            "action": action,
            "target_type": target.type,
            "target_id": str(target.id)[:64],
            "target_label": storable(target.label)[:200],
            "job_id": target.job_id,
            "tenant_id": target.tenant_id,
            "outcome": outcome,
            "detail": storable(detail)[:4000],
            "source_ip": actor.source_ip,
            "request_id": request_id if request_id is not None else uuid.uuid4(),
        },
    )


def audit_record(
    *,
    actor: Actor,
    action: str,
    target: Target,
    outcome: str,
    now: datetime,
    detail: str = "",
    request_id=None,
) -> None:
    """Append one row to the audit log. Through the store's insert, as a job's rows: one prepared
    statement, where the ORM's save built and compiled the INSERT anew for every API write."""
    row = entry(
        actor=actor, action=action, target=target, outcome=outcome, now=now, detail=detail, request_id=request_id
    )
    store().insert_new([row])
    _announce([row])


# The system, as the audit log names it when Tickwork acts on its own.
SYSTEM = Actor(user_id=None, username="tickwork", kind=ActorKind.SYSTEM)


def audit_auto_pause(job_id: Any, now: datetime, reason: str) -> None:
    """The system paused a job (jobs.transitions.auto_pause, whose listener this is: audit/apps.py):
    its row, in the transaction of the pause, so that neither commits without the other."""
    job = Job.objects.only("name", "tenant_id").get(pk=job_id)
    audit_record(
        actor=SYSTEM,
        action="job.auto_pause",
        target=Target.of_job(job),
        outcome=AuditOutcome.OK,
        now=now,
        detail=reason,
    )


def audit_records(rows: Iterable[AuditEntry]) -> None:
    """Append several rows in one INSERT (an admin's bulk deletion, a batch of jobs)."""
    saved = AuditEntry.objects.bulk_create(list(rows))
    _announce(saved)


def outcome_of(exc: BaseException) -> tuple[str, str]:
    """How an exception that stopped an action reads in the log: its outcome and a detail."""
    if isinstance(exc, ValidationError):
        return AuditOutcome.INVALID, "; ".join(error_lines(exc.detail))
    if isinstance(exc, REFUSALS):
        return AuditOutcome.REFUSED, str(exc)
    if isinstance(exc, Http404):
        return AuditOutcome.NOT_FOUND, str(exc)
    return AuditOutcome.ERROR, f"{exc.__class__.__name__}: {exc}"


def error_lines(detail: Any, prefix: str = "") -> list[str]:
    """DRF's nested errors as "target.handler: unknown handler …" lines."""
    if isinstance(detail, dict):
        return [line for key, value in detail.items() for line in error_lines(value, f"{prefix}{key}.")]
    if isinstance(detail, list):
        return [line for item in detail for line in error_lines(item, prefix)]
    return [f"{prefix.rstrip('.')}: {detail}" if prefix else str(detail)]


def audited(
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
    """Run `run` and its audit row in one transaction; if it raises, record how it ended (after
    the rollback) and raise the same exception."""
    try:
        with transaction.atomic():
            result = run()
            audit_record(
                actor=actor,
                action=action,
                target=target_of(result) if target_of else target,
                outcome=AuditOutcome.OK,
                now=now,
                detail=describe(result),
                request_id=request_id,
            )
        return result
    except Exception as exc:
        outcome, detail = outcome_of(exc)
        audit_record(
            actor=actor, action=action, target=target, outcome=outcome, now=now, detail=detail, request_id=request_id
        )
        raise
