"""Each field of the job's table (jobs/fields.py) as the API's contract takes it and writes it, by
the model's name of the field or of its group: its serializer field in a request (INPUT: its
validation, its help text) and in an answer (OUTPUT: which of the model's attributes it reads,
how it writes it). A group's fields (a target's, a retry policy's) are web/api/job_fields.py's,
shared with a workflow's steps.

JobInputSerializer and JobOutputSerializer (web/api/job_serializers.py) take their fields from
here (job_fields.table_fields), under their API names (web/api/job_api_names.py) and in these
tables' order, which is the contract's (a request's, an answer's keys; the schema's). Each table
has a line for every field of the job's table: web/tests/test_job_fields.py fails until it does."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.fields import GROUPS
from jobs.models import ConcurrencyPolicy, Job, JobType, MisfirePolicy, Priority
from web.api.event_serializers import EventNameField
from web.api.job_api_names import API_NAME
from web.api.job_fields import (
    AwareDateTimeField,
    ChoiceField,
    PayloadField,
    RetryPolicyOutputSerializer,
    RetryPolicySerializer,
    ScheduleField,
    StoredChoiceField,
    TargetOutputSerializer,
    TargetSerializer,
    TimezoneField,
)
from web.api.workflow_serializers import EventFilterField, WorkflowField, WorkflowSerializer

MAX_DELAY_SEC = 10 * 365 * 86400
# The longest interval: ten years, as a delay.
MAX_EVERY_SEC = MAX_DELAY_SEC
# The longest debounce window and wait: a week.
MAX_DEBOUNCE_SEC = 7 * 86400
# pauseAfterFailures: past this many failed fires in a row, pausing is no longer a safeguard.
MAX_PAUSE_AFTER_FAILURES = 1000


class BlankAsNull(serializers.CharField):
    def to_representation(self, value):
        return str(value) or None  # CharField's own, str(value), without the call through super()


class _PriorityName(StoredChoiceField):
    """The stored priority (a number) by its name, as get_priority_display gives it: without the
    choices' dict that Django builds anew for every call (a quarter of a 1,000-job answer)."""

    _names = dict(Priority.choices)

    def __init__(self, **kwargs) -> None:
        super().__init__(Priority.names, **kwargs)

    def to_representation(self, value):
        return self._names[value]


@extend_schema_field(TargetOutputSerializer(allow_null=True))
class _TargetOrNull(serializers.Field):
    """A job's target, read from the job's fields of the group, each that it holds (`rateLimit`
    only when it names one); null for a workflow job, whose steps name theirs."""

    def __init__(self, **kwargs) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Job):
        if value.workflow:
            return None
        return {
            API_NAME[field.name]: getattr(value, field.name)
            for field in GROUPS["target"]
            if not field.optional_for or getattr(value, field.name) is not None
        }


def _optional_count(most: int, help_text: str) -> serializers.IntegerField:
    """A whole number from 1 to `most` that a job may leave out or set to null (none)."""
    return serializers.IntegerField(min_value=1, max_value=most, required=False, allow_null=True, help_text=help_text)


INPUT: dict[str, serializers.Field] = {
    "name": serializers.CharField(max_length=200),
    "type": ChoiceField(choices=JobType.values),
    "run_at": AwareDateTimeField(required=False, allow_null=True),
    "delay_sec": serializers.IntegerField(min_value=0, max_value=MAX_DELAY_SEC, required=False, allow_null=True),
    "schedule": ScheduleField(max_length=200, required=False),
    "timezone": TimezoneField(required=False),
    "every_sec": _optional_count(
        MAX_EVERY_SEC, "INTERVAL jobs: seconds between fires, anchored at startAt (a run's length never shifts them)."
    ),
    "start_at": AwareDateTimeField(
        required=False,
        allow_null=True,
        help_text="INTERVAL jobs: the first fire, the anchor of the rest (default: when the job is created). "
        "CRON jobs: no fire before it.",
    ),
    "target": TargetSerializer(required=False, help_text="What runs: required unless `workflow` is given."),
    "workflow": WorkflowSerializer(
        required=False, help_text="Steps to run on each fire instead of one `target`; each has its own target."
    ),
    "event_name": EventNameField(
        required=False, help_text="EVENT jobs: the name of the events it runs for (an event's `name`)."
    ),
    "event_filter": EventFilterField(required=False, allow_null=True),
    "debounce_sec": _optional_count(
        MAX_DEBOUNCE_SEC,
        "EVENT jobs with a target: matching events less than this many seconds apart fold into one run, "
        "started this long after the last of them (docs/events.md, Debounce). Null: a run per event.",
    ),
    "debounce_max_sec": _optional_count(
        MAX_DEBOUNCE_SEC,
        "With debounceSec: the folded run starts at the latest this many seconds after the first event "
        "it folds, however many keep coming. Null: no limit.",
    ),
    "payload": PayloadField(required=False),
    "retry_policy": RetryPolicySerializer(required=False),
    "timeout_sec": serializers.IntegerField(min_value=1, max_value=7 * 86400, required=False),
    "priority": ChoiceField(choices=Priority.names, required=False),
    "misfire_policy": ChoiceField(choices=MisfirePolicy.values, required=False),
    "concurrency_policy": ChoiceField(choices=ConcurrencyPolicy.values, required=False),
    "catchup_window_sec": _optional_count(
        MAX_EVERY_SEC,
        "CRON and INTERVAL jobs: a missed fire runs only if it is at most this many seconds old "
        "when dispatched; older ones are skipped and recorded as skipped, under every misfirePolicy. "
        "Null or absent: no window.",
    ),
    "pause_after_failures": _optional_count(
        MAX_PAUSE_AFTER_FAILURES,
        "CRON and INTERVAL jobs: paused by the system after this many consecutive fires ended DEAD "
        "(every attempt failed), with pausedReason set and a JOB_AUTO_PAUSED alert; a fire that succeeds, "
        "or a resume, starts the count again. Null (the default): never.",
    ),
}

OUTPUT: dict[str, serializers.Field] = {
    "name": serializers.CharField(),
    "type": StoredChoiceField(JobType.values),
    "run_at": serializers.DateTimeField(source="run_at", allow_null=True),
    "delay_sec": serializers.IntegerField(source="delay_sec", allow_null=True),
    "schedule": serializers.CharField(),
    "timezone": serializers.CharField(),
    "every_sec": serializers.IntegerField(source="every_sec", allow_null=True, help_text="An INTERVAL job's period."),
    "start_at": serializers.DateTimeField(
        source="start_at", allow_null=True, help_text="An INTERVAL job's anchor; a CRON job's earliest fire."
    ),
    "target": _TargetOrNull(),
    "workflow": WorkflowField(allow_null=True, help_text="A workflow job's steps; null for a job with a target."),
    "event_name": BlankAsNull(
        source="event_name", allow_null=True, help_text="An EVENT job's event name; null otherwise."
    ),
    "event_filter": EventFilterField(
        source="event_filter", allow_null=True, help_text="An EVENT job's payload filter."
    ),
    "debounce_sec": serializers.IntegerField(
        source="debounce_sec", allow_null=True, help_text="A debounced EVENT job's quiet period; null otherwise."
    ),
    "debounce_max_sec": serializers.IntegerField(
        source="debounce_max_sec", allow_null=True, help_text="A debounced EVENT job's longest wait; null if none."
    ),
    "payload": PayloadField(),
    "retry_policy": RetryPolicyOutputSerializer(source="*"),
    "timeout_sec": serializers.IntegerField(source="timeout_sec"),
    "priority": _PriorityName(),
    "misfire_policy": StoredChoiceField(MisfirePolicy.values, source="misfire_policy"),
    "concurrency_policy": StoredChoiceField(ConcurrencyPolicy.values, source="concurrency_policy"),
    "catchup_window_sec": serializers.IntegerField(
        source="catchup_window_sec", allow_null=True, help_text="A recurring job's catch-up window; null: none."
    ),
    "pause_after_failures": serializers.IntegerField(
        source="pause_after_failures",
        allow_null=True,
        help_text="Consecutive fires ending DEAD after which the system pauses the job; null: never.",
    ),
}
