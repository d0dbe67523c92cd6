import django_filters
from django import forms
from django.core.exceptions import ValidationError

from events.models import Event, EventSource
from web.api.job_filters import invalid_choice_message


class GivenChoiceField(forms.ChoiceField):
    """A choice; given but empty (`?source=`) is refused, not read as "no filter"."""

    def to_python(self, value):
        if value == "":
            raise ValidationError(self.error_messages["invalid_choice"], code="invalid_choice", params={"value": ""})
        return super().to_python(value)


class GivenChoiceFilter(django_filters.ChoiceFilter):
    field_class = GivenChoiceField


class EventFilter(django_filters.FilterSet):
    # Exact: an event's name is an identifier (a job's `on`), not prose to search in.
    name = django_filters.CharFilter(field_name="name")
    source = GivenChoiceFilter(choices=EventSource.choices, error_messages=invalid_choice_message(EventSource.choices))
    tenant = django_filters.CharFilter(field_name="tenant__slug")

    class Meta:
        model = Event
        fields: list[str] = []
