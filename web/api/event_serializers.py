"""An event's public shape (camelCase, as the API contract writes it) and its validation."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from events.models import EVENT_NAME_MAX_LENGTH, EVENT_NAME_PATTERN, EventSource
from jobs.payloads import StrictSerializer
from web.api.job_fields import payload_problem

NAME_HELP = (
    "The event's name, e.g. `invoice.paid`: 1 to 200 of the characters A-Z, a-z, 0-9, `.`, `_`, `:`, `-`. "
    "An event job fires on it when its `on` is this name."
)


class EventNameField(serializers.RegexField):
    """An event's name, as events.models.EVENT_NAME_PATTERN allows."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("max_length", EVENT_NAME_MAX_LENGTH)
        kwargs.setdefault("help_text", NAME_HELP)
        super().__init__(EVENT_NAME_PATTERN, **kwargs)
        self.error_messages["invalid"] = (
            "must be 1 to 200 of the characters A-Z, a-z, 0-9, '.', '_', ':' and '-' (e.g. invoice.paid)"
        )

    def to_internal_value(self, data):
        # Not coerced from a number, as a CharField would: 7 is a client's mistake, not a name.
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string")
        return super().to_internal_value(data)


@extend_schema_field({"type": "object", "additionalProperties": True})
class EventPayloadField(serializers.JSONField):
    """A JSON object: what happened. Event jobs' filters compare its top-level values."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if problem := payload_problem(value):
            raise serializers.ValidationError(problem)
        return value


class EventInputSerializer(StrictSerializer):
    """An event to post: its name and payload. Unknown fields are refused."""

    name = EventNameField()
    payload = EventPayloadField(required=False, default=dict, help_text="A JSON object; `{}` when left out.")
    tenant = serializers.SlugField(required=False, help_text="Staff sessions only: the tenant to post in.")


class EventAcceptedSerializer(serializers.Serializer):
    """What POST /v1/events answers, and a replay of its Idempotency-Key answers again."""

    eventId = serializers.UUIDField(source="id")
    matched = serializers.IntegerField(min_value=0, help_text="How many event jobs it matched: one run started each.")
    executionIds = serializers.ListField(
        child=serializers.UUIDField(),
        source="execution_ids",
        help_text="Every execution it started: the matched jobs by creation, a workflow's steps in order.",
    )
    runIds = serializers.ListField(
        child=serializers.UUIDField(), source="run_ids", help_text="The runs it started of workflow jobs."
    )


class EventSerializer(EventAcceptedSerializer):
    """An event as it was received, and what it started."""

    name = serializers.CharField()
    payload = EventPayloadField()
    receivedAt = serializers.DateTimeField(source="received_at")
    # `source` is a serializer field's own attribute: declared as `source_` and renamed in get_fields.
    source_ = serializers.ChoiceField(
        choices=EventSource.values,
        help_text="`api`: POST /v1/events; `webhook`: POST /v1/hooks/{tenant}/{event}.",
    )

    def get_fields(self):
        # The event's own fields first, then what it started.
        fields = super().get_fields()
        fields["source"] = fields.pop("source_")
        order = ["eventId", "name", "payload", "receivedAt", "source", "matched", "executionIds", "runIds"]
        return {name: fields[name] for name in order}
