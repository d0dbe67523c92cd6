"""The jobs pages' actions, audited (dashboard.services.audited_action): pause, resume, cancel and
trigger one job or a selection, create, update, restore a version, and start or cancel a
backfill, each through the service the API calls."""

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rest_framework.exceptions import ValidationError

from dashboard.services import ActionRefused, Actor, Target, audited_action
from executions.models import Backfill
from jobs.models import Job, JobVersion
from jobs.states import JobState
from readmodels.backfills import backfill_counts
from scheduling import backfills
from scheduling.job_changes import job_cancel, job_pause, job_resume, job_trigger, job_update
from scheduling.job_creation import job_create
from tenants.models import Tenant
from web.api.job_versions import job_version_restore

# What each job action calls, and how its success reads. Trigger is apart: it makes an execution.
_JOB_SERVICES = {"pause": (job_pause, "paused"), "resume": (job_resume, "resumed"), "cancel": (job_cancel, "cancelled")}
JOB_ACTIONS = (*_JOB_SERVICES, "trigger")


def job_act(*, actor: Actor, job: Job, action: str, now: datetime) -> str:
    """Pause, resume, trigger or cancel a job through scheduling.job_changes; returns what happened."""
    if action == "trigger":
        execution = audited_action(
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
    audited_action(
        actor=actor, action=f"job.{action}", target=Target.of_job(job), now=now, run=lambda: service(job=job, now=now)
    )
    return done


def job_create_audited(*, actor: Actor, tenant: Tenant, fields: dict[str, Any], now: datetime) -> Job:
    """Create through scheduling.job_creation.job_create (validated by the API's serializer beforehand)."""
    return audited_action(
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
    return audited_action(
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
    return audited_action(
        actor=actor,
        action="job.restore",
        target=Target.of_job(job),
        now=now,
        run=lambda: job_version_restore(job=job, version=version, actor=actor.label, now=now),
        describe=lambda _: f"restored version {version.number}",
    )


def backfill_create_audited(*, actor: Actor, job: Job, asked: dict[str, Any], now: datetime) -> Backfill:
    """Start a backfill through scheduling.backfills.backfill_create, with `asked` as the API's
    NewBackfillSerializer validated it; audited as the API's (backfill.create on the job, its
    detail naming the backfill and its counts). What the plan refuses by then (the range grew
    past now's rules meanwhile) is audited INVALID and refused, naming the field."""

    def create() -> Backfill:
        try:
            return backfills.backfill_create(
                job=job,
                start=asked["from"],
                end=asked["to"],
                order=asked["order"],
                reprocess=asked["reprocess"],
                max_concurrent=asked["maxConcurrent"],
                now=now,
            )
        except backfills.BackfillRefused as refusal:
            raise ValidationError({refusal.field: [refusal.message]}) from None

    def describe(backfill: Backfill) -> str:
        counts = backfill_counts(backfill)
        return f"backfill {backfill.pk}: {counts['fires']} fires, {counts['skipped']} skipped"

    return audited_action(
        actor=actor, action="backfill.create", target=Target.of_job(job), now=now, run=create, describe=describe
    )


def backfill_target(backfill: Backfill) -> Target:
    """A backfill in the audit log, as the API's cancel names it."""
    return Target(type="backfill", id=str(backfill.pk), job_id=backfill.job_id, tenant_id=backfill.tenant_id)


def backfill_cancel_audited(*, actor: Actor, backfill: Backfill, now: datetime) -> Backfill:
    """Cancel a backfill through scheduling.backfills.backfill_cancel; one that has ended is
    refused (audited REFUSED), where the API answers it as it is: an operator who pressed Cancel
    is told that nothing was cancelled."""
    return audited_action(
        actor=actor,
        action="backfill.cancel",
        target=backfill_target(backfill),
        now=now,
        run=lambda: backfills.backfill_cancel(
            backfill=backfill, now=now, reason=f"backfill cancelled by {actor.label}", refuse_ended=True
        ),
    )


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
        if job.standing not in BULK_JOB_ACTIONS[action]:
            result.skipped.append(job)
            continue
        try:
            audited_action(
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
