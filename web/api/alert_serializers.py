"""Alert rules and alerts, as the API contract writes them (camelCase), and a rule's validation:
the fields' own here, what depends on the kind in alerts/kinds.py."""

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import EmailValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from alerts.kinds import DEFAULT_WINDOW_SECONDS, WINDOW_MAX_SECONDS, WINDOW_MIN_SECONDS
from alerts.models import Alert, AlertKind, AlertRule, NotificationEvent
from alerts.states import AlertState, NotificationState
from jobs.payloads import StrictSerializer
from outbound.http_call import HttpCallError, check_url
from web.api.job_fields import PoolNameField, StoredChoiceField

MAX_CHANNELS = 10
MAX_URL_LENGTH = 2000
MAX_EMAIL_LENGTH = 254
CHANNEL_TYPES = ("webhook", "email")
# The enum of channel types (a notification's `type`), narrowed to one in each kind of channel.
_CHANNEL_TYPE = "#/components/schemas/ChannelTypeEnum"

_CHANNELS_SCHEMA = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_CHANNELS,
    "description": "Where to notify, on firing and on resolving: 1 to 10 distinct channels. A webhook is a "
    "signed JSON POST (X-Tickwork-Signature, as the `http` handler signs); an email goes through Django's "
    "email backend.",
    "items": {
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "type": {"allOf": [{"$ref": _CHANNEL_TYPE}], "enum": ["webhook"]},
                    "url": {"type": "string", "format": "uri", "maxLength": MAX_URL_LENGTH, "pattern": "^https?://"},
                },
                "required": ["type", "url"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {
                    "type": {"allOf": [{"$ref": _CHANNEL_TYPE}], "enum": ["email"]},
                    "to": {"type": "string", "format": "email", "maxLength": MAX_EMAIL_LENGTH},
                },
                "required": ["type", "to"],
                "additionalProperties": False,
            },
        ]
    },
}


def _channel_problem(channel: Any) -> tuple[str | None, dict[str, str] | None]:
    """Why a channel is refused (as a message, or per field), or (None, None)."""
    if not isinstance(channel, dict):
        return 'must be an object: {"type": "webhook", "url": …} or {"type": "email", "to": …}', None
    kind = channel.get("type")
    if kind not in CHANNEL_TYPES:
        return None, {"type": 'must be "webhook" or "email"'}
    field = "url" if kind == "webhook" else "to"
    unknown = sorted(set(channel) - {"type", field})
    if unknown:
        return None, {name: f"unknown field for a {kind} channel" for name in unknown}
    value = channel.get(field)
    if not isinstance(value, str) or not value.strip():
        return None, {field: f"is required for a {kind} channel"}
    if "\x00" in value:  # PostgreSQL stores no NUL in JSON text
        return None, {field: "must not contain a NUL character"}
    if kind == "webhook":
        if len(value) > MAX_URL_LENGTH:
            return None, {"url": f"must be at most {MAX_URL_LENGTH} characters"}
        try:
            check_url(value)
        except HttpCallError as exc:
            return None, {"url": str(exc).removeprefix("refused: ")}
    else:
        try:
            EmailValidator()(value)
        except DjangoValidationError:
            return None, {"to": "must be an email address"}
        if len(value) > MAX_EMAIL_LENGTH:
            return None, {"to": f"must be at most {MAX_EMAIL_LENGTH} characters"}
    return None, None


@extend_schema_field(_CHANNELS_SCHEMA)
class ChannelsField(serializers.Field):
    """1 to 10 distinct channels, each a webhook URL (http or https) or an email address."""

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise serializers.ValidationError("must be a list of channels")
        if not 1 <= len(data) <= MAX_CHANNELS:
            raise serializers.ValidationError(f"must have 1 to {MAX_CHANNELS} channels")
        errors: dict[int, Any] = {}
        seen: set[tuple[str, str]] = set()
        cleaned = []
        for index, channel in enumerate(data):
            message, fields = _channel_problem(channel)
            if message or fields:
                errors[index] = [message] if message else {k: [v] for k, v in fields.items()}  # type: ignore[union-attr]
                continue
            field = "url" if channel["type"] == "webhook" else "to"
            value = channel[field].strip()
            if (channel["type"], value) in seen:
                errors[index] = {field: ["is given twice"]}
                continue
            seen.add((channel["type"], value))
            cleaned.append({"type": channel["type"], field: value})
        if errors:
            raise serializers.ValidationError({str(index): detail for index, detail in errors.items()})
        return cleaned

    def to_representation(self, value):
        return value


THRESHOLD_HELP = (
    "The kind's limit: FAILURE_RATE a percentage (0 to 100, required); START_LAG_P99 milliseconds (required); "
    "DEAD_LETTER a count of executions (default 0: any new one); SCHEDULER_DOWN seconds (default 60); "
    "MISSED_FIRE seconds late (default 60); NO_WORKERS and JOB_AUTO_PAUSED none (ignored, answered null). "
    "The alert fires above it."
)


class AlertRuleInputSerializer(StrictSerializer):
    """A rule to create (or, every field optional, the fields of a rule to change)."""

    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=AlertKind.choices)
    threshold = serializers.FloatField(required=False, allow_null=True, help_text=THRESHOLD_HELP)
    windowSec = serializers.IntegerField(
        required=False,
        default=DEFAULT_WINDOW_SECONDS,
        min_value=WINDOW_MIN_SECONDS,
        max_value=WINDOW_MAX_SECONDS,
        help_text="The window FAILURE_RATE, START_LAG_P99 and DEAD_LETTER look back over (default 300).",
    )
    pool = PoolNameField(
        required=False,
        allow_null=True,
        help_text="Only this pool's executions (or, for NO_WORKERS, only this pool; default every known pool).",
    )
    jobId = serializers.UUIDField(
        required=False,
        allow_null=True,
        help_text="Only this job's executions; for MISSED_FIRE and JOB_AUTO_PAUSED, only this cron or interval job "
        "(default every one).",
    )
    channels = ChannelsField()
    enabled = serializers.BooleanField(required=False, default=True)
    tenant = serializers.SlugField(
        required=False,
        help_text="Staff sessions: the tenant whose rule it is; left out, a global rule over every tenant.",
    )

    refused_fields = {"ruleId": "is read-only", "createdAt": "is read-only", "updatedAt": "is read-only"}


class AlertRuleUpdateSerializer(AlertRuleInputSerializer):
    refused_fields = {**AlertRuleInputSerializer.refused_fields, "tenant": "a rule's tenant cannot change"}

    def get_fields(self):
        fields = super().get_fields()
        del fields["tenant"]
        for field in fields.values():
            field.required = False
            if hasattr(field, "default"):
                field.default = serializers.empty
        return fields


class AlertRuleSerializer(serializers.Serializer):
    ruleId = serializers.UUIDField(source="id")
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=AlertKind.choices)
    threshold = serializers.FloatField(allow_null=True, help_text=THRESHOLD_HELP)
    windowSec = serializers.IntegerField(source="window_sec")
    pool = serializers.SerializerMethodField()
    jobId = serializers.UUIDField(source="job_id", allow_null=True)
    channels = ChannelsField()
    enabled = serializers.BooleanField()
    tenant = serializers.SerializerMethodField()
    createdBy = serializers.CharField(source="created_by")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_pool(self, rule: AlertRule) -> str | None:
        return rule.pool or None

    @extend_schema_field(
        serializers.CharField(allow_null=True, help_text="The tenant's slug; null for a global (staff) rule.")
    )
    def get_tenant(self, rule: AlertRule) -> str | None:
        return rule.tenant.slug if rule.tenant else None


class NotificationSerializer(serializers.Serializer):
    event = serializers.ChoiceField(choices=NotificationEvent.choices, help_text="Sent on firing or on resolving.")
    type = StoredChoiceField(CHANNEL_TYPES, source="channel_type")
    target = serializers.CharField(help_text="The webhook's URL or the email address.")
    state = serializers.ChoiceField(
        choices=NotificationState.choices, help_text="PENDING (to send, or retrying), SENT or FAILED (gave up)."
    )
    attempts = serializers.IntegerField()
    lastError = serializers.CharField(source="last_error", help_text="Why the last attempt failed, if it did.")
    sentAt = serializers.DateTimeField(source="sent_at", allow_null=True)


class AlertSerializer(serializers.Serializer):
    alertId = serializers.UUIDField(source="id")
    ruleId = serializers.UUIDField(source="rule_id")
    ruleName = serializers.CharField(source="rule.name")
    kind = serializers.ChoiceField(source="rule.kind", choices=AlertKind.choices)
    state = serializers.ChoiceField(choices=AlertState.choices)
    subject = serializers.CharField(
        help_text="What breached: `all` (the rule's whole scope), `pool:<name>`, `job:<id>`, `dispatcher`, `sweeper`."
    )
    tenant = serializers.SerializerMethodField()
    firedAt = serializers.DateTimeField(source="fired_at")
    resolvedAt = serializers.DateTimeField(source="resolved_at", allow_null=True)
    summary = serializers.CharField(help_text="What was seen when it fired, with the numbers.")
    resolvedSummary = serializers.CharField(source="resolved_summary", help_text="Why it resolved; empty while FIRING.")
    notifications = NotificationSerializer(many=True, source="notifications.all")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_tenant(self, alert: Alert) -> str | None:
        return alert.rule.tenant.slug if alert.rule.tenant else None
