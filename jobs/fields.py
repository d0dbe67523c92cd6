"""The job's fields, declared once: what each is, whose definition holds it, whether a workflow
step may set its own. The table is the job's definition (what it was asked to do: what a PUT may
change, what its versions keep and diff); the rest of the model is INTERNAL. In the model's names
(snake_case): the API's names for them are the web's business (web/api/job_api_names.py), and so
are the serializers that read this table; the versions and their diff (jobs/versions.py), a
run's steps (scheduling/runs.py) and the dashboard's form read it too.

Adding a field to a job: docs/architecture.md, "Where to add things". jobs/tests/test_fields.py
holds every model field of Job to this table or to INTERNAL.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobs.models import RECURRING_TYPES, Job, JobType, Priority


def _instant(value: datetime | None) -> str | None:
    # As the API writes a time: ISO 8601 in UTC, ending in Z.
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _is_workflow(job: Job) -> bool:
    return bool(job.workflow)


def _has_target(job: Job) -> bool:
    return not job.workflow


def _timing_of(*types: str) -> Callable[[Job], bool]:
    return lambda job: job.type in types


@dataclass(frozen=True)
class JobField:
    """One field of a job's definition (what it was asked to do)."""

    name: str  # the model's attribute
    kind: str  # text, integer, instant, choice, priority, boolean, json: how it is written and read
    # The part of the definition that holds it, when it is one of a group ("target", "retry_policy").
    group: str = ""
    # Whether a job's definition holds it: by the job's type or kind (None: every job's).
    held: Callable[[Job], bool] | None = None
    # A workflow step may set its own, which overrides the job's in a run (scheduling/runs.py).
    step: bool = False
    # The types of job whose definition holds it only when it is set (`when_set`): a definition
    # without it says it was unset, and a restore of one unsets it (web/api/job_versions.py).
    optional_for: frozenset[str] = frozenset()

    # The value as a definition keeps it (JSON): a time as the API writes one, a priority by name.
    def stored(self, value: Any) -> Any:
        if self.kind == "instant":
            return _instant(value)
        if self.kind == "priority":
            return Priority(value).label
        return value


def when_set(name: str, kind: str, *types: str, always: tuple[str, ...] = ()) -> JobField:
    """A field that jobs of `types` hold only when it is set (most have none, and their versions
    never said), and jobs of `always` hold whatever its value."""
    return JobField(
        name,
        kind,
        held=lambda job: job.type in always or (job.type in types and getattr(job, name) is not None),
        optional_for=frozenset(types),
    )


FIELDS: tuple[JobField, ...] = (
    JobField("name", "text"),
    JobField("type", "choice"),
    JobField("run_at", "instant", held=_timing_of(JobType.ONCE)),
    JobField("delay_sec", "integer", held=_timing_of(JobType.DELAYED)),
    JobField("schedule", "text", held=_timing_of(JobType.CRON)),
    JobField("timezone", "text", held=_timing_of(JobType.CRON)),
    JobField("every_sec", "integer", held=_timing_of(JobType.INTERVAL)),
    # An INTERVAL job's anchor; a CRON job's earliest fire, when it has one.
    when_set("start_at", "instant", JobType.CRON, always=(JobType.INTERVAL,)),
    JobField("pool", "text", group="target", held=_has_target),
    JobField("handler", "text", group="target", held=_has_target),
    # The target's rate limit, when it names one (pools/rate_limits.py).
    JobField(
        "rate_limit",
        "text",
        group="target",
        held=lambda job: _has_target(job) and job.rate_limit is not None,
        optional_for=frozenset(JobType.values),
    ),
    JobField("payload", "json", held=_has_target),
    # A workflow job's steps carry its targets and payloads: it has these instead.
    JobField("workflow", "json", held=_is_workflow),
    # An EVENT job's event is its timing.
    JobField("event_name", "text", held=_timing_of(JobType.EVENT)),
    JobField("event_filter", "json", held=_timing_of(JobType.EVENT)),
    # A debounced EVENT job's window (events/debounce.py).
    when_set("debounce_sec", "integer", JobType.EVENT),
    when_set("debounce_max_sec", "integer", JobType.EVENT),
    JobField("max_attempts", "integer", group="retry_policy", step=True),
    JobField("backoff", "choice", group="retry_policy", step=True),
    JobField("initial_delay_ms", "integer", group="retry_policy", step=True),
    JobField("max_delay_ms", "integer", group="retry_policy", step=True),
    JobField("jitter", "boolean", group="retry_policy", step=True),
    JobField("timeout_sec", "integer", step=True),
    JobField("priority", "priority"),
    JobField("misfire_policy", "choice"),
    JobField("concurrency_policy", "choice"),
    # A recurring job's catch-up window (jobs/misfire.py) and its pause on repeated failure.
    when_set("catchup_window_sec", "integer", *RECURRING_TYPES),
    when_set("pause_after_failures", "integer", *RECURRING_TYPES),
)
BY_NAME: dict[str, JobField] = {field.name: field for field in FIELDS}
GROUPS: dict[str, tuple[JobField, ...]] = {
    group: tuple(field for field in FIELDS if field.group == group) for group in ("target", "retry_policy")
}
# The model's fields that are not what the job was asked to do: who and when, its state and next
# fire (written by its transitions and the dispatcher), its idempotency.
INTERNAL = frozenset(
    {
        "id",
        "tenant",
        "state",
        "next_fire_at",
        "failed_fires",
        "paused_reason",
        "idempotency_key",
        "request_fingerprint",
        "created_by",
        "created_at",
        "updated_at",
    }
)


def group_of(job: Job, group: str) -> dict[str, Any]:
    """A group's fields of `job`, by name: its retry policy, its target."""
    return {field.name: getattr(job, field.name) for field in GROUPS[group]}


def definition_of(job: Job) -> dict[str, Any]:
    """The job's definition: the fields its type and kind hold, in the table's order, a group's
    fields as an object of their own; values as a definition keeps them (JSON)."""
    definition: dict[str, Any] = {}
    for field in FIELDS:
        if field.held is not None and not field.held(job):
            continue
        value = field.stored(getattr(job, field.name))
        if field.group:
            definition.setdefault(field.group, {})[field.name] = value
        else:
            definition[field.name] = value
    return definition
