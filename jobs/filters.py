import django_filters

from jobs.models import Job, JobType
from jobs.states import JobState


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices)
    type = django_filters.MultipleChoiceFilter(choices=JobType.choices)
    pool = django_filters.CharFilter(field_name="pool")
    handler = django_filters.CharFilter(field_name="handler")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    tenant = django_filters.CharFilter(field_name="tenant__slug")

    class Meta:
        model = Job
        fields: list[str] = []
