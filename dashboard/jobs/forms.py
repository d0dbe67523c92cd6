"""The job form: flat HTML fields in, the API's JSON shape out, validated by the API's own
serializer (web.api.job_serializers.JobInputSerializer), so a page and a client are held to exactly
the same rules. Nothing here validates on its own beyond turning text into JSON.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from jobs.fields import FIELDS, GROUPS, JobField
from jobs.models import RECURRING_TYPES, Job, JobType, Priority
from pools import rate_limits
from web import json_input
from web.api.job_api_names import API_NAME
from web.api.job_serializers import TIMING_FIELD_OF, JobInputSerializer, JobUpdateSerializer
from web.handler_catalog import handler_catalog

# The form makes and changes plain jobs: a workflow's steps and an EVENT job's event (and its
# debounce) are the API's.
NOT_ON_FORM = {"workflow", "event_name", "event_filter", "debounce_sec", "debounce_max_sec"}
# The form's fields: the job's table (jobs/fields.py) in the API's flat names (a group's fields
# are its leaves: handler, maxAttempts), and the tenant to create in.
ON_FORM = tuple(field for field in FIELDS if field.name not in NOT_ON_FORM)
FORM_FIELDS = (*(API_NAME[field.name] for field in ON_FORM), "tenant")
TIMING_FIELD: dict[str, str] = {kind: name for kind, name in TIMING_FIELD_OF.items() if kind != JobType.EVENT}
RETRY_FIELDS = tuple(API_NAME[field.name] for field in GROUPS["retry_policy"] if field.kind != "boolean")
# Fields sent as typed: those of every job that are not its name, type, timing or a document.
SIMPLE_FIELDS = tuple(
    API_NAME[field.name]
    for field in ON_FORM
    if not field.group and field.held is None and field.kind != "json" and field.name not in ("name", "type")
)


@dataclass
class JobForm:
    """What the page shows: raw values as typed, and errors per field."""

    values: dict[str, str]
    errors: dict[str, list[str]] = field(default_factory=dict)
    serializer: JobInputSerializer | None = None

    @property
    def is_valid(self) -> bool:
        return not self.errors and self.serializer is not None

    def error_summary(self) -> str:
        return "; ".join(f"{name}: {' '.join(messages)}" for name, messages in sorted(self.errors.items()))


@dataclass(frozen=True)
class HandlerOption:
    """A handler in the form's choice, as GET /v1/handlers describes it (web/handler_catalog.py)."""

    name: str
    pool: str
    description: str
    payload: str  # its payload's fields, the required ones marked: "url (required), method, …"
    rate_limit: str = ""  # the named rate limit it declares, what a target naming none is held to


def handler_options(chosen: str) -> list[HandlerOption]:
    """The handlers the form offers, by name; a job's handler that this server does not run (an
    app since removed) is offered too, said so, rather than silently replaced by the first."""
    options = [
        HandlerOption(
            name=h.name,
            pool=h.pool,
            description=h.description,
            payload=_payload_fields(h.payload_schema),
            rate_limit=h.rate_limit or "",
        )
        for h in handler_catalog()
    ]
    if chosen and chosen not in {option.name for option in options}:
        options.append(HandlerOption(name=chosen, pool="", description="Not a handler this server runs.", payload=""))
    return options


@dataclass(frozen=True)
class RateLimitOption:
    """A named rate limit in the form's choice: its name, and its rate as the job page says it."""

    name: str
    label: str


def rate_limit_options(chosen: str) -> list[RateLimitOption]:
    """The defined rate limits (`manage.py rate_limit set`), by name; a job's limit since removed
    is offered too, said so, so that an edit of something else keeps it rather than dropping it."""
    options = [RateLimitOption(name=name, label=limit.describe()) for name, limit in sorted(rate_limits.read().items())]
    if chosen and chosen not in {option.name for option in options}:
        options.append(RateLimitOption(name=chosen, label=f"{chosen} (not defined: its runs are not limited)"))
    return options


def _payload_fields(schema: dict[str, Any]) -> str:
    properties = schema.get("properties")
    if not properties:
        return "any JSON object"
    required = set(schema.get("required", ()))
    return ", ".join(f"{name} (required)" if name in required else name for name in properties)


def _utc_iso(value) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else ""


def _as_text(field: JobField, job: Job) -> str:
    """A field of `job` as the form's text."""
    value = getattr(job, field.name)
    if field.kind == "instant":
        # A time its type does not hold is computed (a DELAYED job's runAt), not asked for.
        return _utc_iso(value) if field.held is None or field.held(job) else ""
    if field.kind == "json":
        return json.dumps(value, indent=2, sort_keys=True)
    if field.kind == "boolean":
        return "true" if value else "false"
    if field.kind == "priority":
        return Priority(value).label
    return "" if value is None else str(value)


def initial_values(job: Job | None = None, *, tenant_slug: str = "") -> dict[str, str]:
    """The form's fields as text: a new job's defaults (the model's, for a ONCE job of the `noop`
    handler due now), or an existing job's definition."""
    if job is None:
        shown = Job(type=JobType.ONCE, handler="noop", delay_sec=0)
        return {**{API_NAME[field.name]: _as_text(field, shown) for field in ON_FORM}, "tenant": tenant_slug}
    return {**{API_NAME[field.name]: _as_text(field, job) for field in ON_FORM}, "tenant": job.tenant.slug}


def _posted(post: QueryDict) -> dict[str, str]:
    values = {name: post.get(name, "").strip() for name in FORM_FIELDS}
    # An unticked checkbox is absent from the POST; the hidden field before it says "false".
    values["jitter"] = "true" if "true" in post.getlist("jitter") else "false"
    values["payload"] = post.get("payload", "")
    return values


def flatten_errors(errors: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested errors ({"target": {"handler": [...]}}) keyed by the form's flat names."""
    flat: dict[str, list[str]] = {}
    if isinstance(errors, dict):
        for key, value in errors.items():
            if key == "payload" and isinstance(value, dict):
                # The payload is one box on the page: its keys' errors stay on it, each named.
                nested = flatten_errors(value).items()
                flat["payload"] = [f"{path}: {message}" for path, messages in nested for message in messages]
                continue
            name = prefix if key in ("non_field_errors",) and prefix else key
            if key == "non_field_errors" and not prefix:
                name = "general"
            for sub, messages in flatten_errors(value, name).items():
                flat.setdefault(sub, []).extend(messages)
    elif isinstance(errors, list):
        if all(isinstance(item, str) for item in errors):
            flat[prefix or "general"] = [str(item) for item in errors]
        else:
            for item in errors:
                for sub, messages in flatten_errors(item, prefix).items():
                    flat.setdefault(sub, []).extend(messages)
    else:
        flat[prefix or "general"] = [str(errors)]
    # Nested objects flatten onto their leaves (target.handler → handler, retryPolicy.x → x);
    # an object-wide error stays under the object's name ("target", "retryPolicy").
    return flat


def _parse_payload(text: str, errors: dict[str, list[str]]) -> Any:
    try:
        return json_input.loads(text or "{}", field="payload")
    except json_input.JSONInputError as exc:
        errors["payload"] = [exc.message]
    except json.JSONDecodeError as exc:
        errors["payload"] = [f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"]
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        errors["payload"] = [f"is not valid JSON: {exc}"]
    return None


def _api_data(values: dict[str, str], names: set[str], kind: str, errors: dict[str, list[str]]) -> dict[str, Any]:
    """The API request body for the fields in `names`, from the form's text values."""
    data: dict[str, Any] = {}
    for name in ("name", "type", "timezone", *SIMPLE_FIELDS, "tenant"):
        if name in names and values.get(name):
            data[name] = values[name]
    timing = TIMING_FIELD.get(kind)
    if timing and timing in names and values.get(timing) != "":
        data[timing] = values[timing]
    if "timezone" in data and kind != JobType.CRON:
        del data["timezone"]
    if "startAt" in names and kind in RECURRING_TYPES:
        # Emptied on an update: from now (an interval's anchor), or no earliest fire (cron).
        data["startAt"] = values["startAt"] or None
    if "catchupWindowSec" in names and kind in RECURRING_TYPES:
        # Emptied on an update: no window.
        data["catchupWindowSec"] = values["catchupWindowSec"] or None
    if "pauseAfterFailures" in names and (values.get("pauseAfterFailures") or kind in RECURRING_TYPES):
        # Emptied: never pause (null). Given on another type, sent so that the API refuses it.
        data["pauseAfterFailures"] = values["pauseAfterFailures"] or None
    if {"handler", "pool", "rateLimit"} & names:
        data["target"] = {"handler": values["handler"]}
        if values.get("pool"):
            data["target"]["pool"] = values["pool"]
        if "rateLimit" in names:
            # None: the handler's own limit (null); a target without the key keeps the job's.
            data["target"]["rateLimit"] = values["rateLimit"] or None
    if "payload" in names:
        payload = _parse_payload(values["payload"], errors)
        if payload is not None:
            data["payload"] = payload
    policy: dict[str, str | bool] = {
        name: values[name] for name in RETRY_FIELDS if name in names and values.get(name) != ""
    }
    if "jitter" in names:
        policy["jitter"] = values["jitter"] == "true"
    if policy:
        data["retryPolicy"] = policy
    return data


def bind_create(post: QueryDict) -> JobForm:
    """A create: every field the job's type uses, validated as a POST /v1/jobs body."""
    values = _posted(post)
    errors: dict[str, list[str]] = {}
    kind = values.get("type") or ""
    data = _api_data(values, set(FORM_FIELDS), kind, errors)
    serializer = JobInputSerializer(data=data)
    if not serializer.is_valid():
        errors.update(flatten_errors(serializer.errors))
    return JobForm(values=values, errors=errors, serializer=None if errors else serializer)


def bind_update(post: QueryDict, *, job: Job) -> JobForm:
    """An update: only the fields that differ from the job, validated as a PATCH body.

    Sending an unchanged timing field would not be harmless (a DELAYED job's delay counts
    again from now), so a field is sent only when its text differs from what the form showed.
    """
    values = _posted(post)
    values["type"] = job.type
    values["tenant"] = job.tenant.slug
    initial = initial_values(job)
    errors: dict[str, list[str]] = {}
    changed = {name for name in FORM_FIELDS if name not in ("type", "tenant") and values[name] != initial[name]}
    if "payload" in changed:
        payload = _parse_payload(values["payload"], errors)
        if payload == job.payload:
            changed.discard("payload")
    data = _api_data(values, changed, job.type, errors)
    if not data and not errors:
        return JobForm(values=values, errors={"general": ["nothing changed"]})
    serializer = JobUpdateSerializer(job, data=data, partial=True)
    if not serializer.is_valid():
        errors.update(flatten_errors(serializer.errors))
    return JobForm(values=values, errors=errors, serializer=None if errors else serializer)
