import django_filters

from executions.models import Execution
from executions.states import ExecutionState


class ExecutionFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=ExecutionState.choices)
    jobId = django_filters.UUIDFilter(field_name="job_id")
    pool = django_filters.CharFilter(field_name="pool")
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    scheduledAfter = django_filters.IsoDateTimeFilter(field_name="scheduled_for", lookup_expr="gte")
    scheduledBefore = django_filters.IsoDateTimeFilter(field_name="scheduled_for", lookup_expr="lt")

    class Meta:
        model = Execution
        fields: list[str] = []
