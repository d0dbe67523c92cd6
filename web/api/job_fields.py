"""The fields a job's body is made of (its target, retry policy, timing, payload), shared by the
job's serializer (web/api/job_serializers.py) and a workflow's steps (web/api/workflow_serializers.py):
the field classes, the groups' serializers with their fields' declarations (GROUP_INPUT,
GROUP_OUTPUT), and `table_fields`, which gives a serializer its fields of the job's table."""

import functools
import json
import zoneinfo
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone as django_timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs import cron, registry
from jobs.fields import BY_NAME, GROUPS
from jobs.models import Backoff, Job
from jobs.payloads import StrictSerializer
from pools import rate_limits
from web.api.job_api_names import API_NAME

S = TypeVar("S", bound=serializers.Serializer)


class ChoiceField(serializers.ChoiceField):
    """A choice whose error lists the valid ones, so a caller need not look them up."""

    def __init__(self, choices, **kwargs) -> None:
        super().__init__(choices, **kwargs)
        valid = ", ".join(str(choice) for choice in self.choices)
        self.error_messages["invalid_choice"] = f'"{{input}}" is not a valid choice; valid: {valid}'


class StoredChoiceField(serializers.CharField):
    """An answer's field whose value is one of `choices`, written as stored: as fast as a
    CharField (web/rest.py's representer writes it with `str`), where a ChoiceField would look
    each value up. The schema gives it its choices' enum (web/schema.py), which is the very
    component of an input field with the same choices: a client gets one enum for both."""

    def __init__(self, choices, **kwargs) -> None:
        # Not `choices`, which DRF's OPTIONS answer reads as a ChoiceField's dict.
        self.stored_choices = choices
        super().__init__(**kwargs)


class AwareDateTimeField(serializers.DateTimeField):
    """ISO 8601 with an explicit offset: a bare local time is ambiguous, so it is refused."""

    def __init__(self, **kwargs) -> None:
        # The project's zone, fixed: else DRF asks for the active zone for every value (an
        # asgiref lookup, a sixth of a bulk create's validation, profiled). Nothing activates
        # another zone, so the values are the same.
        kwargs.setdefault("default_timezone", django_timezone.get_default_timezone())
        super().__init__(**kwargs)

    def to_internal_value(self, value):
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                self.fail("invalid", format="ISO 8601 with an offset, e.g. 2027-03-14T09:00:00Z")
            if parsed.tzinfo is None:
                raise serializers.ValidationError("must include a UTC offset, e.g. 2027-03-14T09:00:00Z")
            # What DRF's own parse returns (its ISO 8601 parse is this fromisoformat), not parsed twice.
            return self.enforce_timezone(parsed)
        return super().to_internal_value(value)


@functools.cache
def known_timezones() -> frozenset[str]:
    """The IANA names this machine's zoneinfo lists (read once: it walks the tz database)."""
    return frozenset(zoneinfo.available_timezones())


def _described(kwargs: dict, said: str) -> dict:
    """The field's help text, then `said`: where its valid values are found."""
    kwargs["help_text"] = f"{kwargs['help_text']} {said}" if kwargs.get("help_text") else said
    return kwargs


class TimezoneField(serializers.CharField):
    """An IANA timezone name that this machine's zoneinfo lists. The schema says a string, not an
    enum of this machine's names: they differ between servers (web/schema.py)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("max_length", 64)
        super().__init__(
            **_described(
                kwargs,
                "An IANA timezone name, e.g. `Europe/London`; the server refuses "
                "one its tz database does not know (400 naming the field).",
            )
        )

    def to_internal_value(self, data) -> str:
        value = super().to_internal_value(data)
        try:
            cron.parse_timezone(value)
        except cron.CronError as exc:
            raise serializers.ValidationError(str(exc)) from exc
        if value not in known_timezones():
            raise serializers.ValidationError(f"unknown timezone {value!r}")
        return value


class HandlerNameField(serializers.CharField):
    """A registered handler's name (checked with the pool by TargetSerializer)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("max_length", 100)
        super().__init__(**_described(kwargs, "A handler this server runs: GET /v1/handlers lists them."))


class RateLimitNameField(serializers.CharField):
    """A defined rate limit's name (`manage.py rate_limit set`), or null for none."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("max_length", 64)
        kwargs.setdefault("allow_null", True)
        super().__init__(
            **_described(
                kwargs,
                'A named rate limit its runs are held to (README, "Rate limits"), over its handler\'s own; '
                "null for the handler's.",
            )
        )

    def to_internal_value(self, data) -> str:
        value = super().to_internal_value(data)
        known = rate_limits.read()
        if value not in known:
            named = ", ".join(sorted(known)) or "none is defined (manage.py rate_limit set)"
            raise serializers.ValidationError(f'unknown rate limit "{value}"; known: {named}')
        return value


class PoolNameField(serializers.CharField):
    """A known pool's name (checked with the handler by TargetSerializer)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("max_length", 64)
        super().__init__(**_described(kwargs, "A pool this server knows: GET /v1/pools lists them."))


def _cron_pattern() -> str:
    """A regular expression for the usual five-field cron syntax, for the schema: numbers in each
    field's range, `*`, lists, ranges and steps, month and weekday names, and Jenkins' hashed
    `H`, `H(a-b)`, `H/n`, `H(a-b)/n`. The server reads a little more (steps on ranges) and still
    refuses a schedule that never fires (`0 0 30 2 *`)."""
    months = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
    days = "SUN|MON|TUE|WED|THU|FRI|SAT"
    numbers = [
        "[0-5]?[0-9]",
        "[01]?[0-9]|2[0-3]",
        "0?[1-9]|[12][0-9]|3[01]",
        f"0?[1-9]|1[0-2]|{months}|{months.lower()}",
        f"[0-7]|{days}|{days.lower()}",
    ]
    step = "/[1-9][0-9]?"

    def field(number: str) -> str:
        hashed = f"[Hh](?:\\((?:{number})-(?:{number})\\))?(?:{step})?"
        item = f"\\*(?:{step})?|(?:{number})(?:{step}|-(?:{number}))?|{hashed}"
        return f"(?:{item})(?:,(?:{item}))*"

    return "^" + " ".join(field(number) for number in numbers) + "$"


SCHEDULE_PATTERN = _cron_pattern()


@extend_schema_field(
    {
        "type": "string",
        "maxLength": 200,
        "pattern": SCHEDULE_PATTERN,
        "description": "A five-field cron expression. `H` (Jenkins' hash: `H`, `H(a-b)`, `H/n`, `H(a-b)/n`) "
        "stands for a value chosen from the job's id, the same for the job's life.",
    }
)
class ScheduleField(serializers.CharField):
    """A five-field cron expression; `H` values are resolved with the job's id."""


@extend_schema_field({"type": "object", "additionalProperties": True}, component_name="Payload")
class PayloadField(serializers.JSONField):
    """A JSON object: the handler's input."""


def table_fields(table: Mapping[str, serializers.Field], *, group: str = "", after: str | None = None):
    """A class decorator: the serializer's fields of the job's table (jobs/fields.py), as `table`
    declares them by their model names: a group's (`group`: "target", "retry_policy"), or else
    the job's own and its groups' objects. Each under its API name (web/api/job_api_names.py),
    in `table`'s order, after the class's own field `after` (None: before its own).

    They go in DRF's `_declared_fields`, as if written in the class: a subclass inherits them (and
    drops one as it would a declared field, `name = None`), and each serializer works on its own
    copies (Serializer.get_fields deep-copies them)."""
    chosen = [name for name in table if _in(name, group)]

    def decorate(cls: type[S]) -> type[S]:
        own = list(cls._declared_fields.items())
        clash = {API_NAME[name] for name in chosen} & cls._declared_fields.keys()
        if clash:
            raise TypeError(f"{cls.__name__} declares {sorted(clash)} itself: the job's table declares them")
        at = 0 if after is None else [name for name, _ in own].index(after) + 1
        cls._declared_fields = dict([*own[:at], *((API_NAME[name], table[name]) for name in chosen), *own[at:]])
        return cls

    return decorate


def _in(name: str, group: str) -> bool:
    """Whether the table's field (or group) `name` is one of `group`'s fields ("": the job's own)."""
    if name in GROUPS:
        return not group
    if name not in BY_NAME:
        raise KeyError(f"{name!r} is neither a field nor a group of the job's table (jobs/fields.py)")
    return BY_NAME[name].group == group


# A group's fields (jobs.fields.GROUPS) by their model names, in the contract's order: as a request
# gives them (a workflow step's too) and as an answer writes them. The job's other fields are
# web/api/job_contract.py's; web/tests/test_job_fields.py holds every field of the table to a line
# in each side.
GROUP_INPUT: dict[str, serializers.Field] = {
    "handler": HandlerNameField(),
    "pool": PoolNameField(required=False),
    "rate_limit": RateLimitNameField(required=False),
    "max_attempts": serializers.IntegerField(min_value=1, max_value=100, required=False, default=3),
    "backoff": ChoiceField(choices=Backoff.values, required=False, default=Backoff.EXPONENTIAL),
    "initial_delay_ms": serializers.IntegerField(min_value=0, max_value=86_400_000, required=False, default=1000),
    "max_delay_ms": serializers.IntegerField(min_value=0, max_value=7 * 86_400_000, required=False, default=60_000),
    "jitter": serializers.BooleanField(required=False, default=True),
}
GROUP_OUTPUT: dict[str, serializers.Field] = {
    "pool": serializers.CharField(),
    "handler": serializers.CharField(),
    "rate_limit": serializers.CharField(required=False),  # only when the target names one
    "max_attempts": serializers.IntegerField(source="max_attempts"),
    "backoff": StoredChoiceField(Backoff.values),
    "initial_delay_ms": serializers.IntegerField(source="initial_delay_ms"),
    "max_delay_ms": serializers.IntegerField(source="max_delay_ms"),
    "jitter": serializers.BooleanField(),
}


@table_fields(GROUP_INPUT, group="target")
class TargetSerializer(StrictSerializer):
    def validate(self, attrs):
        # An update may name only one of the two; the other comes from the job.
        job: Job | None = self.root.instance
        name = attrs.get("handler") or (job.handler if job else "")
        spec = registry.get(name)
        if spec is None:
            raise serializers.ValidationError(
                {"handler": [f"unknown handler '{name}'; known: {', '.join(registry.handler_names())}"]}
            )
        pool = attrs.get("pool") or (job.pool if job is not None and job.handler == spec.name else spec.pool)
        if pool not in registry.pools():
            raise serializers.ValidationError(
                {"pool": [f"unknown pool '{pool}'; known: {', '.join(registry.pools())}"]}
            )
        named = {"rateLimit": attrs["rateLimit"]} if "rateLimit" in attrs else {}
        return {"handler": spec.name, "pool": pool, **named}


@table_fields(GROUP_INPUT, group="retry_policy")
class RetryPolicySerializer(StrictSerializer):
    def validate(self, attrs):
        # An update may give part of the policy: JobInputSerializer.validate merges it with the
        # job's and checks the bounds of the whole.
        if "maxDelayMs" in attrs and "initialDelayMs" in attrs and attrs["maxDelayMs"] < attrs["initialDelayMs"]:
            raise serializers.ValidationError({"maxDelayMs": ["must be at least initialDelayMs"]})
        return attrs


# No docstrings: the schema would take them for the components' descriptions.
@table_fields(GROUP_OUTPUT, group="target")
class TargetOutputSerializer(serializers.Serializer):
    pass  # the schema's; a job's target field writes it (web/api/job_contract.py)


@table_fields(GROUP_OUTPUT, group="retry_policy")
class RetryPolicyOutputSerializer(serializers.Serializer):
    pass


def payload_problem(value: Any) -> str | None:
    """Why `value` cannot be a payload (a job's, a step's, an event's): not an object, or over
    TICKWORK_MAX_PAYLOAD_BYTES as compact JSON; or None."""
    if not isinstance(value, dict):
        return "must be a JSON object"
    size = len(json.dumps(value, separators=(",", ":")).encode())
    limit = settings.TICKWORK_MAX_PAYLOAD_BYTES
    if size > limit:
        return f"is {size} bytes; the limit is {limit} (TICKWORK_MAX_PAYLOAD_BYTES)"
    return None
