from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from jobs.models import Job


def job_list(*, scope: list[int] | None) -> QuerySet[Job]:
    jobs = Job.objects.select_related("tenant")
    return jobs if scope is None else jobs.filter(tenant_id__in=scope)


def job_get(*, scope: list[int] | None, job_id) -> Job | None:
    try:
        return job_list(scope=scope).filter(pk=job_id).first()
    except ValidationError:  # a malformed id is simply not found
        return None


def job_locked(*, job_id) -> Job:
    """The job, its row locked (SELECT … FOR UPDATE) until the caller's transaction ends."""
    return Job.objects.select_for_update().select_related("tenant").get(pk=job_id)
