"""The job's public shape (camelCase, as the API contract writes it) and its validation. The
fields of the job's table (jobs/fields.py) are declared in web/api/job_contract.py, from which the
serializers here take them; the rest (its id, tenant, state and times) are declared here."""

import threading
from collections.abc import Callable
from typing import Any

from django.utils import timezone as django_timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs import cron, registry
from jobs.fields import FIELDS, group_of
from jobs.models import RECURRING_TYPES, ConcurrencyPolicy, Job, JobType, Priority
from jobs.payloads import StrictSerializer
from jobs.states import JobState
from readmodels.runs import RUN_STATES
from scheduling.job_creation import MAX_BULK_JOBS
from web.api.execution_serializers import ExecutionSerializer
from web.api.job_api_names import API_NAME
from web.api.job_contract import INPUT, OUTPUT, BlankAsNull
from web.api.job_fields import StoredChoiceField, table_fields
from web.api.workflow_serializers import WorkflowSerializer, payload_object

HASH_SEED_BEFORE_CREATE = "00000000-0000-0000-0000-000000000000"
# The field that says when each type of job fires (what an EVENT job fires on).
TIMING_FIELD_OF: dict[str, str] = {
    JobType.ONCE: "runAt",
    JobType.DELAYED: "delaySec",
    JobType.CRON: "schedule",
    JobType.INTERVAL: "everySec",
    JobType.EVENT: "on",
}


# The job's fields (its table's), then its own: web/api/job_contract.py declares them.
@table_fields(INPUT)
class JobInputSerializer(StrictSerializer):
    """Validates a create (all of it) or an update (partial=True: what is given)."""

    tenant = serializers.SlugField(required=False, help_text="Staff sessions only: the tenant to create in.")

    def validate_payload(self, value: Any) -> Any:
        return payload_object(value)

    def validate_schedule(self, value: str) -> str:
        if value:
            try:
                cron.validate(value)
            except cron.CronError as exc:
                raise serializers.ValidationError(str(exc)) from exc
        return value

    def validate(self, attrs):
        job: Job | None = self.instance
        if job is not None and "type" in attrs and attrs["type"] != job.type:
            raise serializers.ValidationError({"type": [f"cannot change a {job.type} job into {attrs['type']}"]})
        # A create has its type (a required field); an update keeps the job's unless it repeats it.
        kind: str = attrs["type"] if job is None else attrs.get("type") or job.type
        merged = {
            "runAt": attrs.get("runAt", job.run_at if job else None),
            "delaySec": attrs.get("delaySec", job.delay_sec if job else None),
            "schedule": attrs.get("schedule", job.schedule if job else ""),
            "everySec": attrs.get("everySec", job.every_sec if job else None),
            "on": attrs.get("on", job.event_name if job else ""),
        }
        required = TIMING_FIELD_OF[kind]
        if merged[required] in (None, ""):
            raise serializers.ValidationError({required: [f"is required for type {kind}"]})
        for name in merged:
            if name == required:
                continue
            if attrs.get(name) not in (None, ""):
                raise serializers.ValidationError({name: [f"is not allowed for type {kind}"]})
            # Given empty, another type's field says "none", which it is: nothing to write (a
            # DELAYED job's runAt is when its delay ends, which an update must not blank).
            attrs.pop(name, None)
        if attrs.get("startAt") is not None and kind not in RECURRING_TYPES:
            raise serializers.ValidationError({"startAt": [f"is only used by CRON and INTERVAL jobs, not {kind}"]})
        if attrs.get("catchupWindowSec") is not None and kind not in RECURRING_TYPES:
            raise serializers.ValidationError(
                {"catchupWindowSec": [f"is only used by CRON and INTERVAL jobs, not {kind}"]}
            )
        if attrs.get("concurrencyPolicy") == ConcurrencyPolicy.BUFFER_ONE and kind not in RECURRING_TYPES:
            raise serializers.ValidationError(
                {"concurrencyPolicy": [f"BUFFER_ONE is only used by CRON and INTERVAL jobs, not {kind}"]}
            )
        if attrs.get("pauseAfterFailures") is not None and kind not in RECURRING_TYPES:
            raise serializers.ValidationError(
                {"pauseAfterFailures": [f"is only used by CRON and INTERVAL jobs, not {kind}"]}
            )
        if attrs.get("filter") and kind != JobType.EVENT:
            raise serializers.ValidationError({"filter": [f"is only used by EVENT jobs, not {kind}"]})
        self._check_target_or_workflow(attrs, job)
        self._check_debounce(attrs, job, kind)
        if "timezone" in attrs and kind != JobType.CRON and attrs["timezone"] != "UTC":
            raise serializers.ValidationError({"timezone": [f"is only used by CRON jobs, not {kind}"]})
        if "retryPolicy" in attrs and job is not None:
            current = {API_NAME[name]: value for name, value in group_of(job, "retry_policy").items()}
            policy = attrs["retryPolicy"] = {**current, **attrs["retryPolicy"]}
            if policy["maxDelayMs"] < policy["initialDelayMs"]:
                raise serializers.ValidationError(
                    {"retryPolicy": {"maxDelayMs": [f"must be at least initialDelayMs ({policy['initialDelayMs']})"]}}
                )
        if kind == JobType.CRON:
            timezone = attrs.get("timezone", job.timezone if job else "UTC")
            # A new job's id, which resolves its H values, is not known yet: a stand-in checks
            # the rest, and job_create's own check answers for the id it gets.
            seed = str(job.pk) if job is not None else HASH_SEED_BEFORE_CREATE
            try:
                cron.next_fire(merged["schedule"], timezone, django_timezone.now(), seed=seed)
            except cron.CronError as exc:
                raise serializers.ValidationError({"schedule": [str(exc)]}) from exc
        self._check_payload(attrs, job)
        return attrs

    @staticmethod
    def _check_target_or_workflow(attrs, job: Job | None) -> None:
        """A job runs one target or a workflow of steps, never both; an update keeps its kind."""
        if "target" in attrs and "workflow" in attrs:
            raise serializers.ValidationError({"workflow": ["give a target or a workflow, not both"]})
        if job is None:
            if "target" not in attrs and "workflow" not in attrs:
                raise serializers.ValidationError({"target": ["is required (or give a workflow of steps)"]})
        elif job.workflow and "target" in attrs:
            raise serializers.ValidationError({"target": ["a workflow job's steps name their targets"]})
        elif not job.workflow and "workflow" in attrs:
            raise serializers.ValidationError({"workflow": ["a job with a target cannot become a workflow"]})
        if "payload" in attrs and ("workflow" in attrs or (job is not None and job.workflow)):
            raise serializers.ValidationError({"payload": ["a workflow job's steps carry their payloads"]})

    @staticmethod
    def _check_debounce(attrs, job: Job | None, kind: str) -> None:
        """A debounce folds the runs of an EVENT job with a target (events/debounce.py); its longest
        wait, when it has one, is no shorter than its quiet period."""
        workflow = "workflow" in attrs or (job is not None and bool(job.workflow))
        for name in ("debounceSec", "debounceMaxSec"):
            if attrs.get(name) is None:
                continue
            if kind != JobType.EVENT:
                raise serializers.ValidationError({name: [f"is only used by EVENT jobs, not {kind}"]})
            if workflow:
                raise serializers.ValidationError({name: ["a workflow job is not debounced: each event starts a run"]})
        quiet = attrs.get("debounceSec", job.debounce_sec if job else None)
        longest = attrs.get("debounceMaxSec", job.debounce_max_sec if job else None)
        if longest is not None and quiet is None:
            raise serializers.ValidationError({"debounceMaxSec": ["needs debounceSec"]})
        if longest is not None and quiet is not None and longest < quiet:
            raise serializers.ValidationError({"debounceMaxSec": [f"must be at least debounceSec ({quiet})"]})

    def _check_payload(self, attrs, job: Job | None) -> None:
        """The payload must fit its handler's declared shape: checked when either changes."""
        if "payload" not in attrs and "target" not in attrs:
            return
        if "target" in attrs:
            handler = attrs["target"]["handler"]
        elif job is not None:
            handler = job.handler
        else:  # a create without a target, refused as such
            return
        spec = registry.get(handler)
        payload = attrs["payload"] if "payload" in attrs else (job.payload if job is not None else {})
        errors = registry.payload_errors(spec, payload) if spec is not None else None
        if errors:
            raise serializers.ValidationError({"payload": errors})

    def to_model_fields(self) -> dict[str, Any]:
        """The validated data in the model's terms, only what was given (for partial updates)."""
        return self.model_fields_of(self.validated_data)

    @staticmethod
    def model_fields_of(data: Any) -> dict[str, Any]:
        """`data`, as validated by this serializer, in the model's terms: each field of the job's
        table (jobs/fields.py) under its API name (web/api/job_api_names.py), a group's from its
        object."""
        fields: dict[str, Any] = {}
        for field in FIELDS:
            name = API_NAME[field.group or field.name]
            if name not in data:
                continue
            if field.group and API_NAME[field.name] not in data[name]:
                continue  # a group's optional field not given (a target's rateLimit): as it is
            value = data[name][API_NAME[field.name]] if field.group else data[name]
            fields[field.name] = _TO_MODEL[field.name](value) if field.name in _TO_MODEL else value
        if "workflow" in data:  # a workflow's steps name their targets: the job has none
            fields.update(pool="", handler="", rate_limit=None)
        return fields


# Where a field's model value is not the one validated.
_TO_MODEL: dict[str, Callable[[Any], Any]] = {
    "priority": lambda name: Priority[name].value,
    "workflow": WorkflowSerializer.stored,
    "event_filter": lambda value: value or None,
}


class JobUpdateSerializer(JobInputSerializer):
    """An update (PUT or PATCH): what is given changes; a job's tenant never does."""

    tenant = None  # type: ignore[assignment]  # DRF's way to drop a declared field
    refused_fields = {"tenant": "cannot be changed: a job stays in the tenant it was created in"}


# Its id and tenant, the job's fields (its table's: web/api/job_contract.py declares them), then
# its state and times.
@table_fields(OUTPUT, after="tenant")
class JobOutputSerializer(serializers.Serializer):
    jobId = serializers.CharField(source="id")
    tenant = serializers.CharField(source="tenant.slug")
    # As shown: a one-off whose runs have all ended reads COMPLETED (executions/standing.py).
    state = StoredChoiceField(JobState.choices, source="standing")
    nextFireAt = serializers.DateTimeField(source="shown_next_fire_at", allow_null=True)
    pausedReason = BlankAsNull(
        source="paused_reason",
        allow_null=True,
        read_only=True,
        help_text='Why the system paused the job (e.g. "paused after 3 consecutive failed fires": its '
        "pauseAfterFailures was reached); null when it is not paused, was paused by someone, or was resumed.",
    )
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="shown_updated_at")

    lastRunState = serializers.SerializerMethodField()
    lastRunAt = serializers.SerializerMethodField()

    @extend_schema_field(
        {
            "type": "string",
            "nullable": True,
            # A last run has begun, so it is never PENDING (a run none of whose steps has begun).
            "enum": [*(state for state in RUN_STATES if state != "PENDING"), None],
            "description": "The state of the job's last run (the newest that has begun: a workflow job's run "
            "of steps, a plain job's execution): RUNNING while it can still run (a retry waiting included), "
            "then SUCCEEDED, FAILED (DEAD, or discarded from the dead letter since) or CANCELLED. Null before "
            "its first run begins. A one-off job whose run failed is COMPLETED with lastRunState FAILED; "
            "`?failing=true` lists the jobs whose last run is FAILED.",
        }
    )
    def get_lastRunState(self, job: Job) -> str | None:
        return _last_run_of(job).state

    @extend_schema_field(
        {
            "type": "string",
            "nullable": True,
            "format": "date-time",
            "description": "When the last run ended; while it runs, when it started (or last moved). Null "
            "before its first run begins.",
        }
    )
    def get_lastRunAt(self, job: Job) -> str | None:
        at = _last_run_of(job).at
        return serializers.DateTimeField().to_representation(at) if at is not None else None


def _last_run_of(job: Job):
    """The job's last run, as a list page filled it in (readmodels.last_runs.last_runs, two
    statements for the page), or read for this job alone."""
    from readmodels.last_runs import last_run

    found = getattr(job, "last_run", None)
    if found is None:
        found = job.last_run = last_run(job)  # type: ignore[attr-defined]  # kept for the other field
    return found


class JobDetailOutputSerializer(JobOutputSerializer):
    latestExecutions = serializers.SerializerMethodField(help_text="The newest executions, newest first.")

    @extend_schema_field(ExecutionSerializer(many=True))
    def get_latestExecutions(self, job: Job) -> list[dict]:
        from readmodels.selectors import latest_executions

        return ExecutionSerializer(latest_executions(job_id=job.pk), many=True).data  # type: ignore[return-value]  # a ReturnList


_validators = threading.local()


def validated_job(data: Any, memo: dict | None = None) -> dict[str, Any]:
    """A create's body as JobInputSerializer validates it; the 400 is the one
    `JobInputSerializer(data=data).is_valid(raise_exception=True)` raises. `memo`, one dict for
    the items of one batch, keeps the values its fields found valid (StrictSerializer.batch_memo).

    One serializer per thread checks every body, as DRF's many=True checks a list: building one
    per request deep-copies its fields and its nested serializers' (0.5 ms of CPU on a create,
    profiled under gunicorn). A serializer's run_validation keeps no state between calls; a
    thread of its own keeps even the lazy build of its fields unshared."""
    if not isinstance(data, dict):  # not an object: the serializer's own answer ("No data provided", …)
        JobInputSerializer(data=data).is_valid(raise_exception=True)
    validator = getattr(_validators, "job", None)
    if validator is None:
        validator = _validators.job = JobInputSerializer()
    validator.batch_memo = memo
    try:
        return validator.run_validation(data)
    finally:
        validator.batch_memo = None


class JobBulkInputSerializer(StrictSerializer):
    """A bulk create's body, for the schema: the view checks the list and then each item with
    JobInputSerializer, so that its answer can name every bad item by index."""

    jobs = serializers.ListField(
        child=JobInputSerializer(),
        min_length=1,
        max_length=MAX_BULK_JOBS,
        help_text=f"1 to {MAX_BULK_JOBS} job bodies, each as POST /v1/jobs takes one; all in one tenant.",
    )


class JobBulkOutputSerializer(serializers.Serializer):
    jobs = JobOutputSerializer(many=True, help_text="The jobs, in the order of the request's items.")


def bulk_items(data: Any) -> list:
    """The list of a bulk body's items; a ValidationError naming `jobs` (or an unknown field)
    when the body is not `{"jobs": [1 to MAX_BULK_JOBS items]}`."""
    unknown = sorted(set(data) - {"jobs"}) if isinstance(data, dict) else []
    if unknown:
        raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
    items = data.get("jobs") if isinstance(data, dict) else None
    if items is None:
        raise serializers.ValidationError({"jobs": ["is required: a list of job bodies"]})
    if not isinstance(items, list):
        raise serializers.ValidationError({"jobs": [f"must be a list of job bodies, not {type(items).__name__}"]})
    if not items:
        raise serializers.ValidationError({"jobs": ["must hold at least one job"]})
    if len(items) > MAX_BULK_JOBS:
        raise serializers.ValidationError(
            {"jobs": [f"holds {len(items)} jobs; a bulk request may hold at most {MAX_BULK_JOBS}"]}
        )
    return items
