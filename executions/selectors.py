from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from executions.models import Execution, ExecutionEvent


def execution_list(*, scope: list[int] | None) -> QuerySet[Execution]:
    executions = Execution.objects.all()
    return executions if scope is None else executions.filter(tenant_id__in=scope)


def execution_get(*, scope: list[int] | None, execution_id) -> Execution | None:
    try:
        return execution_list(scope=scope).select_related("job").filter(pk=execution_id).first()
    except ValidationError:  # a malformed id is simply not found
        return None


def execution_events(*, execution: Execution) -> QuerySet[ExecutionEvent]:
    return ExecutionEvent.objects.filter(execution=execution).order_by("at", "id")


def latest_executions(*, job_id, limit: int = 10) -> list[Execution]:
    return list(Execution.objects.filter(job_id=job_id).order_by("-scheduled_for", "-created_at")[:limit])
