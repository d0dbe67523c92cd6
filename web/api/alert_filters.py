import django_filters

from alerts.models import Alert
from alerts.states import AlertState
from web.api.event_filters import GivenChoiceFilter
from web.api.execution_filters import UUIDFilter
from web.api.job_filters import invalid_choice_message


class AlertFilter(django_filters.FilterSet):
    state = GivenChoiceFilter(choices=AlertState.choices, error_messages=invalid_choice_message(AlertState.choices))
    ruleId = UUIDFilter(field_name="rule_id")

    class Meta:
        model = Alert
        fields: list[str] = []
