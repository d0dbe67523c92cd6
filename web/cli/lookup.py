"""What a command works on, found as an operator gives it: the tenant by its slug, and a job or
an execution of that tenant by its id, whole or its first 8 characters or more (web/id_search.py,
as the dashboard's search boxes read it). Another tenant's id is not found, as the API answers
404 for it: --tenant scopes every read and every action."""

from django.core.management.base import CommandError
from django.db.models import QuerySet

from audit.models import AuditOutcome
from executions.models import Execution
from jobs.models import Job
from jobs.selectors import job_list
from readmodels.selectors import execution_list
from tenants.models import Tenant
from tenants.selectors import tenant_get
from web.id_search import id_span


class NotFound(CommandError):
    """No such object in the tenant, or an id that names none (or several): `outcome` says which
    for the audit row of an action that never reached its object."""

    def __init__(self, message: str, *, outcome: str = AuditOutcome.NOT_FOUND) -> None:
        super().__init__(message)
        self.outcome = outcome


def tenant_named(slug: str) -> Tenant:
    tenant = tenant_get(slug=slug)
    if tenant is None:
        raise NotFound(f"no tenant '{slug}'")
    return tenant


def job_in(tenant: Tenant, given: str) -> Job:
    return _one(job_list(scope=[tenant.pk]), given, "job", tenant)


def execution_in(tenant: Tenant, given: str) -> Execution:
    return _one(execution_list(scope=[tenant.pk]).select_related("job"), given, "execution", tenant)


def _one(rows: QuerySet, given: str, what: str, tenant: Tenant):
    span = id_span(given)
    if span is None:
        raise NotFound(
            f"'{given}' is not an id: give the {what}'s id whole, or its first 8 characters or more",
            outcome=AuditOutcome.INVALID,
        )
    found = list(rows.filter(span.q("pk")).order_by("pk")[:2])
    if not found:
        raise NotFound(f"no {what} {given} in tenant {tenant.slug}")
    if len(found) > 1:
        raise NotFound(
            f"{given} starts more than one {what} id in tenant {tenant.slug}: give more of it",
            outcome=AuditOutcome.INVALID,
        )
    return found[0]
