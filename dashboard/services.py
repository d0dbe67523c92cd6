"""Writes made from the dashboard. Each action calls the same service the API calls, and each
leaves one audit row saying who did what to which object, when, and how it ended.

The audit log's writer lives in audit/services.py (the API and the admin record through it too);
Actor, Target, audit_record and REFUSALS are re-exported here under the names the dashboard's
code has always used. A successful action and its audit row commit in one transaction; a refused
or failed action is recorded after its transaction rolled back, so the log also shows what was
attempted.
"""

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from rest_framework.exceptions import ValidationError

from audit.models import AuditOutcome
from audit.services import REFUSALS, Actor, Target, audit_record, audited, error_lines
from executions.models import Execution
from jobs.models import Job, JobVersion
from jobs.states import JobState
from scheduling.execution_changes import execution_cancel, execution_redrive
from scheduling.job_changes import job_cancel, job_pause, job_resume, job_trigger, job_update
from scheduling.job_creation import job_create
from tenants.models import Tenant
from web.api.job_versions import job_version_restore

__all__ = ["REFUSALS", "Actor", "Target", "audit_record"]

T = TypeVar("T")
_error_lines = error_lines


class ActionRefused(Exception):
    """The service refused the action (the object's state forbids it); the message says why."""


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


# What each job action calls, and how its success reads. Trigger is apart: it makes an execution.
_JOB_SERVICES = {"pause": (job_pause, "paused"), "resume": (job_resume, "resumed"), "cancel": (job_cancel, "cancelled")}
JOB_ACTIONS = (*_JOB_SERVICES, "trigger")


def job_act(*, actor: Actor, job: Job, action: str, now: datetime) -> str:
    """Pause, resume, trigger or cancel a job through scheduling.job_changes; returns what happened."""
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
    """Create through scheduling.job_creation.job_create (validated by the API's serializer beforehand)."""
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
    """Change a job through scheduling.job_changes.job_update; the audit row lists the changed fields."""
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


def execution_cancel_audited(*, actor: Actor, execution: Execution, now: datetime) -> str:
    """Cancel through scheduling.execution_changes.execution_cancel: CANCELLED at once, or RUNNING with a
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
