"""Writes made from the dashboard. Each action calls the same service the API calls, and each
leaves one audit row saying who did what to which object, when, and how it ended.

A successful action and its audit row commit in one transaction: there is never an effect
without its row, nor a row claiming an effect that was rolled back. A refused or failed action
is recorded after its transaction rolled back, so the log also shows what was attempted.
"""

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db import transaction
from rest_framework.exceptions import ValidationError

from dashboard.models import AuditEntry, AuditOutcome
from executions.models import Execution
from executions.scheduling import QuotaExceeded, job_cancel, job_create, job_pause, job_resume, job_trigger, job_update
from executions.services import execution_cancel, execution_redrive
from executions.states import InvalidTransition
from jobs.models import Job, JobVersion
from jobs.states import InvalidJobTransition, JobState
from tenants.models import Tenant
from web.api.job_versions import job_version_restore
from web.json_input import printable

T = TypeVar("T")
# What the services raise when an object's state forbids the action: a refusal, not a fault.
REFUSALS = (InvalidJobTransition, InvalidTransition, QuotaExceeded)


@dataclass(frozen=True)
class Actor:
    """Who acts, as the audit log records it."""

    user_id: int | None
    username: str
    source_ip: str | None = None

    @classmethod
    def of(cls, request) -> "Actor":
        user = request.user
        return cls(user_id=user.pk, username=user.get_username(), source_ip=request.META.get("REMOTE_ADDR") or None)

    @property
    def label(self) -> str:
        """How a job's version names the author of a change made here."""
        return f"dashboard {self.username}"


@dataclass(frozen=True)
class Target:
    type: str  # "job" | "execution"
    id: str = ""
    label: str = ""
    job_id: Any = None
    tenant_id: int | None = None

    @classmethod
    def of_job(cls, job: Job) -> "Target":
        return cls(type="job", id=str(job.pk), label=job.name, job_id=job.pk, tenant_id=job.tenant_id)

    @classmethod
    def of_execution(cls, execution: Execution) -> "Target":
        label = f"{execution.job.name} #{execution.attempt}" if execution.job_id else ""
        return cls(
            type="execution",
            id=str(execution.pk),
            label=label,
            job_id=execution.job_id,
            tenant_id=execution.tenant_id,
        )


class ActionRefused(Exception):
    """The service refused the action (the object's state forbids it); the message says why."""


def audit_record(
    *,
    actor: Actor,
    action: str,
    target: Target,
    outcome: AuditOutcome,
    now: datetime,
    detail: str = "",
    request_id=None,
) -> AuditEntry:
    """Append one row to the audit log. Text from a form may hold what PostgreSQL cannot store
    (a NUL), so it is written escaped: a refused form is still audited, not a 500."""
    extra = {"request_id": request_id} if request_id is not None else {}
    return AuditEntry.objects.create(
        at=now,
        actor_id=actor.user_id,
        actor=actor.username,
        action=action,
        target_type=target.type,
        target_id=target.id,
        target_label=printable(target.label)[:200],
        job_id=target.job_id,
        tenant_id=target.tenant_id,
        outcome=outcome,
        detail=printable(detail)[:4000],
        source_ip=actor.source_ip,
        **extra,
    )


def _audited(
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
    """Run `run` and its audit row in one transaction; on a refusal or error, record that."""
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
    except ValidationError as exc:
        # Input checked inside the action (a restored version's definition): nothing was written.
        detail = "; ".join(_error_lines(exc.detail))
        audit_record(
            actor=actor,
            action=action,
            target=target,
            outcome=AuditOutcome.INVALID,
            now=now,
            detail=detail,
            request_id=request_id,
        )
        raise ActionRefused(detail) from exc
    except REFUSALS as exc:
        audit_record(
            actor=actor,
            action=action,
            target=target,
            outcome=AuditOutcome.REFUSED,
            now=now,
            detail=str(exc),
            request_id=request_id,
        )
        raise ActionRefused(str(exc)) from exc
    except Exception as exc:
        audit_record(
            actor=actor,
            action=action,
            target=target,
            outcome=AuditOutcome.ERROR,
            now=now,
            detail=f"{exc.__class__.__name__}: {exc}",
            request_id=request_id,
        )
        raise


def _error_lines(detail: Any, prefix: str = "") -> list[str]:
    """DRF's nested errors as "target.handler: unknown handler …" lines."""
    if isinstance(detail, dict):
        return [line for key, value in detail.items() for line in _error_lines(value, f"{prefix}{key}.")]
    if isinstance(detail, list):
        return [line for item in detail for line in _error_lines(item, prefix)]
    return [f"{prefix.rstrip('.')}: {detail}" if prefix else str(detail)]


# What each job action calls, and how its success reads. Trigger is apart: it makes an execution.
_JOB_SERVICES = {"pause": (job_pause, "paused"), "resume": (job_resume, "resumed"), "cancel": (job_cancel, "cancelled")}
JOB_ACTIONS = (*_JOB_SERVICES, "trigger")


def job_act(*, actor: Actor, job: Job, action: str, now: datetime) -> str:
    """Pause, resume, trigger or cancel a job through executions.scheduling; returns what happened."""
    if action == "trigger":
        execution = _audited(
            actor=actor,
            action="job.trigger",
            target=Target.of_job(job),
            now=now,
            run=lambda: job_trigger(job=job, now=now),
            describe=lambda e: f"execution {e.pk}",
        )
        return f"triggered: execution {execution.pk}"
    if action not in _JOB_SERVICES:
        raise ValueError(f"unknown job action {action!r}")
    service, done = _JOB_SERVICES[action]
    _audited(
        actor=actor, action=f"job.{action}", target=Target.of_job(job), now=now, run=lambda: service(job=job, now=now)
    )
    return done


def job_create_audited(*, actor: Actor, tenant: Tenant, fields: dict[str, Any], now: datetime) -> Job:
    """Create through executions.scheduling.job_create (validated by the API's serializer beforehand)."""
    return _audited(
        actor=actor,
        action="job.create",
        target=Target(type="job", label=str(fields.get("name", "")), tenant_id=tenant.pk),
        now=now,
        run=lambda: job_create(tenant=tenant, fields=fields, now=now, actor=actor.label).job,
        describe=lambda job: f"{job.type} {job.handler} in {job.pool}",
        target_of=Target.of_job,
    )


def job_update_audited(*, actor: Actor, job: Job, fields: dict[str, Any], now: datetime) -> Job:
    """Change a job through executions.scheduling.job_update; the audit row lists the changed fields."""
    return _audited(
        actor=actor,
        action="job.update",
        target=Target.of_job(job),
        now=now,
        run=lambda: job_update(job=job, fields=fields, now=now, actor=actor.label),
        describe=lambda _: "changed " + ", ".join(sorted(fields)),
    )


def job_version_restore_audited(*, actor: Actor, job: Job, version: JobVersion, now: datetime) -> Job:
    """Make a version's definition current again through the API's restore (validated as a PUT
    of it, applied by job_update, recorded as the next version); a definition that no longer
    validates is audited INVALID and refused with the reasons."""
    return _audited(
        actor=actor,
        action="job.restore",
        target=Target.of_job(job),
        now=now,
        run=lambda: job_version_restore(job=job, version=version, actor=actor.label, now=now),
        describe=lambda _: f"restored version {version.number}",
    )


def audit_invalid(*, actor: Actor, action: str, target: Target, errors: Any, now: datetime) -> AuditEntry:
    """A form that did not validate: nothing was written but the attempt."""
    return audit_record(
        actor=actor, action=action, target=target, outcome=AuditOutcome.INVALID, now=now, detail=str(errors)
    )


def audit_not_found(*, actor: Actor, action: str, target_type: str, target_id: str, now: datetime) -> AuditEntry:
    """An action on an object that does not exist in the caller's scope. The row has no tenant,
    so only staff see it: it must not tell a tenant that someone else's object exists."""
    return audit_record(
        actor=actor,
        action=action,
        target=Target(type=target_type, id=str(target_id)[:64]),
        outcome=AuditOutcome.NOT_FOUND,
        now=now,
    )


def execution_cancel_audited(*, actor: Actor, execution: Execution, now: datetime) -> str:
    """Cancel through executions.services.execution_cancel: CANCELLED at once, or RUNNING with a
    cancel request the worker honours at its next heartbeat."""
    return _audited(
        actor=actor,
        action="execution.cancel",
        target=Target.of_execution(execution),
        now=now,
        run=lambda: execution_cancel(execution=execution, now=now, reason=f"cancelled by {actor.username}"),
        describe=lambda state: "cancelled" if state == "CANCELLED" else "cancel requested (running)",
    )


def execution_retry_audited(*, actor: Actor, execution: Execution, now: datetime, request_id=None) -> Execution:
    """Re-drive a DEAD, FAILED or CANCELLED execution through execution_redrive."""
    return _audited(
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


# The job states each bulk action applies to; a selected job in another state is skipped.
BULK_JOB_ACTIONS: dict[str, frozenset[str]] = {
    "pause": frozenset({JobState.ACTIVE}),
    "resume": frozenset({JobState.PAUSED}),
    "cancel": frozenset({JobState.ACTIVE, JobState.PAUSED}),
}


@dataclass
class JobsActResult:
    done: list[Job]
    skipped: list[Job]  # in a state the action does not apply to, or refused when it was tried


def jobs_act_audited(*, actor: Actor, jobs: list[Job], action: str, now: datetime) -> JobsActResult:
    """Pause, resume or cancel several jobs through the same services as one job's action, each
    in its own transaction with its own audit row (sharing one request id). A job whose state
    the action does not apply to is skipped without an attempt; one whose state changed under
    us is refused by the service (audited as such) and counted as skipped too."""
    service, _ = _JOB_SERVICES[action]
    request_id = uuid.uuid4()
    result = JobsActResult(done=[], skipped=[])
    for job in jobs:
        if job.state not in BULK_JOB_ACTIONS[action]:
            result.skipped.append(job)
            continue
        try:
            _audited(
                actor=actor,
                action=f"job.{action}",
                target=Target.of_job(job),
                now=now,
                run=functools.partial(service, job=job, now=now),
                request_id=request_id,
            )
            result.done.append(job)
        except ActionRefused:
            result.skipped.append(job)
    return result
