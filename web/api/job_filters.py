import django_filters

from executions.standing import jobs_in
from jobs.models import Job, JobType
from jobs.states import JobState
from readmodels.last_runs import failing


def invalid_choice_message(choices) -> dict[str, str]:
    """A filter's error for an unknown value, listing the valid ones."""
    valid = ", ".join(value for value, _ in choices)
    return {"invalid_choice": f'"%(value)s" is not a valid choice; valid: {valid}'}


# A yes/no filter: these two words, anything else refused (not read as "no filter").
_BOOLEAN = [("true", "true"), ("false", "false")]


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(
        distinct=False,  # no join to repeat a row, and DISTINCT sorts the list
        choices=JobState.choices,
        method="filter_state",
        error_messages=invalid_choice_message(JobState.choices),
    )
    type = django_filters.MultipleChoiceFilter(
        distinct=False,  # a column of the row: no join to repeat it, and DISTINCT sorts the list
        choices=JobType.choices,
        error_messages=invalid_choice_message(JobType.choices),
    )
    pool = django_filters.CharFilter(field_name="pool")
    handler = django_filters.CharFilter(field_name="handler")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    failing = django_filters.ChoiceFilter(
        choices=_BOOLEAN,
        method="filter_failing",
        error_messages=invalid_choice_message(_BOOLEAN),
        help_text="true: only the jobs whose last run ended FAILED (lastRunState FAILED); false: all the others.",
    )

    class Meta:
        model = Job
        fields: list[str] = []

    def filter_state(self, queryset, name, value):
        # As shown: COMPLETED is read from the one-offs' executions (executions/standing.py).
        return queryset.filter(jobs_in(value)) if value else queryset

    def filter_failing(self, queryset, name, value):
        return failing(queryset, failed=value == "true")
