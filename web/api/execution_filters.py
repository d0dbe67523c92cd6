from datetime import UTC, datetime

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_datetime
from django_filters.fields import IsoDateTimeField

from executions.models import Execution
from executions.states import ExecutionState
from web.api.job_filters import invalid_choice_message


class UtcDateTimeField(IsoDateTimeField):
    """ISO 8601 with an offset, as the API's times are everywhere (a bare local time is
    ambiguous), turned into UTC here: Python reads offsets up to ±23:59 but PostgreSQL refuses
    those past ±15:59, so an offset is never passed on as given."""

    default_error_messages = {"invalid": "Enter an ISO 8601 time with an offset, e.g. 2027-03-14T09:00:00Z."}

    def to_python(self, value):
        if value is None:  # not given
            return None
        try:
            parsed = parse_datetime(str(value).strip())
        except ValueError:  # well formed but not a date, e.g. month 13
            parsed = None
        if parsed is None or parsed.tzinfo is None:  # given but empty, malformed, or local
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            # Before 0001-01-01 or after 9999-12-31 in UTC (0001-01-01T00:00:00+01:00): as a
            # bound it means "before everything" or "after everything", which the calendar's
            # own ends say as well.
            return datetime.min.replace(tzinfo=UTC) if parsed.year == 1 else datetime.max.replace(tzinfo=UTC)

    def validate(self, value):
        pass  # to_python has refused everything that is not a time


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


class GivenUUIDField(forms.UUIDField):
    """A UUID; given but empty is refused, not read as "no filter"."""

    def to_python(self, value):
        if value == "":
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


class UUIDFilter(django_filters.UUIDFilter):
    field_class = GivenUUIDField


class ExecutionFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(
        distinct=False,  # a column of the row: no join to repeat it, and DISTINCT sorts the list
        choices=ExecutionState.choices,
        error_messages=invalid_choice_message(ExecutionState.choices),
    )
    jobId = UUIDFilter(field_name="job_id")
    runId = UUIDFilter(field_name="run_id", help_text="A workflow run's steps.")
    pool = django_filters.CharFilter(field_name="pool")
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    scheduledAfter = UtcDateTimeFilter(field_name="scheduled_for", lookup_expr="gte")
    scheduledBefore = UtcDateTimeFilter(field_name="scheduled_for", lookup_expr="lt")

    class Meta:
        model = Execution
        fields: list[str] = []
