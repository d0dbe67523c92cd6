from datetime import UTC

import django_filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField

from executions.models import Execution
from executions.states import ExecutionState
from jobs.filters import invalid_choice_message


class UtcDateTimeField(IsoDateTimeField):
    """ISO 8601, turned into UTC here: Python reads offsets up to ±23:59 but PostgreSQL refuses
    those past ±15:59, so an offset is never passed on as given."""

    default_error_messages = {"invalid": "Enter an ISO 8601 time, e.g. 2027-03-14T09:00:00Z."}

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
            raise ValidationError(self.error_messages["invalid"], code="invalid") from None


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


class ExecutionFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(
        choices=ExecutionState.choices, error_messages=invalid_choice_message(ExecutionState.choices)
    )
    jobId = django_filters.UUIDFilter(field_name="job_id")
    pool = django_filters.CharFilter(field_name="pool")
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    scheduledAfter = UtcDateTimeFilter(field_name="scheduled_for", lookup_expr="gte")
    scheduledBefore = UtcDateTimeFilter(field_name="scheduled_for", lookup_expr="lt")

    class Meta:
        model = Execution
        fields: list[str] = []
