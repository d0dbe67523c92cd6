"""The command line's job actions: trigger, pause, resume and cancel, each through the service the
API and the dashboard call (scheduling/job_changes.py) and each with its audit row, actor kind
`cli` and the operating system's user as the actor (audit.services.cli_actor), as the API and
the dashboard record theirs: the action and its row in one transaction; a refusal recorded after
the rollback, then said in one line; an id not found in the tenant recorded too (NOT_FOUND, or
INVALID for an id that names none or several), under the tenant the command was given."""

from datetime import datetime

from django.core.management.base import CommandError

from audit.services import REFUSALS, Target, audit_record, audited, cli_actor
from executions.models import Execution
from jobs.models import Job
from scheduling.job_changes import job_cancel, job_pause, job_resume, job_trigger
from tenants.models import Tenant
from web.cli.lookup import NotFound, job_in

_SERVICES = {"pause": job_pause, "resume": job_resume, "cancel": job_cancel}
ACTIONS = (*_SERVICES, "trigger")


def job_act(*, tenant: Tenant, given: str, action: str, now: datetime) -> tuple[Job, Execution | None]:
    """Do `action` to the job `given` (an id as typed) of the tenant: the job (as it is after a
    pause, resume or cancel) and the execution a trigger made. CommandError, in one line, when
    the job is not found or the action refused."""
    actor = cli_actor()
    try:
        job = job_in(tenant, given)
    except NotFound as exc:
        target = Target(type="job", id=given.strip()[:64], tenant_id=tenant.pk)
        audit_record(actor=actor, action=f"job.{action}", target=target, outcome=exc.outcome, now=now, detail=str(exc))
        raise
    try:
        if action == "trigger":
            execution = audited(
                actor=actor,
                action="job.trigger",
                target=Target.of_job(job),
                now=now,
                run=lambda: job_trigger(job=job, now=now),
                describe=lambda made: f"execution {made.pk}",
            )
            return job, execution
        service = _SERVICES[action]
        changed = audited(
            actor=actor,
            action=f"job.{action}",
            target=Target.of_job(job),
            now=now,
            run=lambda: service(job=job, now=now),
        )
        return changed, None
    except REFUSALS as exc:
        raise CommandError(f"{action} refused: {exc}") from exc
