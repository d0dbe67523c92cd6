"""The OpenAPI schema, made to say what the server does: the error statuses each operation
answers, request objects that refuse unknown fields, operations named for what they do, and
links between operations for clients and stateful testers.

Names that depend on the deployment (handlers, pools) or on its tz database (timezones) are
strings, not enums: a client generated against one server must work against another. Where the
valid ones are listed is in each field's description (GET /v1/handlers, GET /v1/pools).

tests_schema/ holds the server to it with schemathesis against a live web role.
"""

import inspect

from drf_spectacular import openapi
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_choice_field, force_instance
from rest_framework import serializers
from rest_framework.mixins import ListModelMixin
from rest_framework.permissions import AllowAny

from web import authentication_schema  # noqa: F401  # registers the bearer scheme (as the API's views load)
from web.job_schema import job_create_variants, job_update_target

ERROR_REF = {"$ref": "#/components/schemas/Error"}

# Why each error status is answered; every operation documents the ones it can give.
ERRORS = {
    "400": "The request is malformed or a field is invalid; the body names each field and why.",
    "401": "No token, or an unknown or revoked one.",
    "403": "The session may not do this (a session's unsafe request also needs its CSRF token).",
    "404": "No such object in the caller's tenant (or an invalid page cursor).",
    "409": "The object's state does not allow this now (or an Idempotency-Key reused with another body).",
    "413": "The request body is larger than the API reads.",
    "429": "The tenant is over a quota (active jobs, submissions per minute).",
    "503": "The database is unavailable; retry later.",
}

# Operations that change a job's or an execution's state, and so can find it in the wrong one.
_STATEFUL_POSTS = ("/pause", "/resume", "/trigger", "/cancel", "/retry", "/restore", "/backfill")
# A POST to one of these paths does what the path says: its operation is `jobs_pause`, not the
# `jobs_pause_create` that drf-spectacular names every POST.
_ACTIONS = (*_STATEFUL_POSTS, "/discard")
# Operations without a body that still validate one: a restore checks the version's definition
# as a PUT of it would be checked.
_VALIDATING_POSTS = ("/restore", "/resume")

# A string that PostgreSQL can store (no NUL) and, after the whitespace trim DRF applies, is
# not empty.
_TEXT = "^[^\\x00]*$"
_NON_BLANK_TEXT = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"


class AutoSchema(openapi.AutoSchema):
    def get_operation_id(self) -> str:
        operation_id = super().get_operation_id()
        if self.method == "GET" and operation_id.endswith("_retrieve") and _is_page(self.get_response_serializers()):
            return operation_id.removesuffix("_retrieve") + "_list"
        if self.method == "POST" and self.path.endswith(_ACTIONS):
            return operation_id.removesuffix("_create")
        return operation_id

    def get_description(self) -> str:  # type: ignore[override]  # DRF's AutoSchema takes (path, method)
        """The method's docstring, else the view's own: not one a view inherits from a mixin
        (drf-spectacular's default), which would describe every operation of its subclasses."""
        method = getattr(self.view, self.method.lower(), None)
        own = self.view.__class__.__dict__.get("__doc__") or ""
        return inspect.cleandoc(getattr(method, "__doc__", None) or own)

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code in self._error_codes():
            responses.setdefault(
                code, {"description": ERRORS[code], "content": {"application/json": {"schema": ERROR_REF}}}
            )
        return responses

    def _error_codes(self) -> list[str]:
        codes = []
        method, path = self.method.upper(), self.path
        authenticated = not any(isinstance(permission, AllowAny) for permission in self.view.get_permissions())
        listing = method == "GET" and isinstance(self.view, ListModelMixin)
        body = method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None
        # The preview's query, resume's dryRun, restore's version, the logs' query and a dead-letter
        # group action's cursor are checked by a serializer too.
        queried = path in ("/v1/schedule/preview", "/v1/executions/{execution_id}/logs") or path.startswith(
            "/v1/dead-letter/groups/{"
        )
        if listing or body or queried or path.endswith(_VALIDATING_POSTS):
            codes.append("400")
        if authenticated:
            codes += ["401", "403"]
        if "{" in path or listing:
            codes.append("404")
        if method in ("PUT", "PATCH", "DELETE") or (method == "POST" and path.endswith(_STATEFUL_POSTS)):
            codes.append("409")
        if body:
            codes.append("413")
        if method == "POST" and path in ("/v1/jobs", "/v1/jobs/bulk"):
            codes += ["409", "429"]
        if authenticated:
            codes.append("503")
        return sorted(set(codes))

    def _map_basic_serializer(self, serializer, direction):
        from jobs.payloads import StrictSerializer

        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictSerializer):
            schema["additionalProperties"] = False
        # The serializer's own docstring, as for an operation (get_description): not StrictSerializer's
        # on every request object, nor an input serializer's on the answer made from it.
        own = vars(type(force_instance(serializer))).get("__doc__")
        if own:
            schema["description"] = inspect.cleandoc(own)
        else:
            schema.pop("description", None)
        return schema

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        from django.core.validators import RegexValidator
        from rest_framework import fields

        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        # A regex's pattern is added after this (drf-spectacular's _insert_field_validators), and
        # only where there is none yet: a field that has one is not plain text.
        plain_text = (
            isinstance(field, fields.CharField)
            and not any(isinstance(validator, RegexValidator) for validator in field.validators)
            and not _constrained(schema)
        )
        if direction == "request" and plain_text and schema.get("type") == "string":
            schema["pattern"] = _TEXT if field.allow_blank or not field.trim_whitespace else _NON_BLANK_TEXT
        return schema


class StoredChoiceFieldExtension(OpenApiSerializerFieldExtension):
    """An answer's choice is the enum an input's ChoiceField of the same choices has, so that
    drf-spectacular's postprocess_schema_enums makes both one component."""

    target_class = "web.api.job_fields.StoredChoiceField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        return build_choice_field(serializers.ChoiceField(choices=self.target.stored_choices))


def postprocess(result, generator, request, public):
    """Say that query strings hold no NUL (PostgreSQL stores none, so
    the filters refuse it), state a job's create body per type (web/job_schema.py), and link
    each answer that names an object to what can be done with it (_LINKS)."""
    paths = result.get("paths", {})
    for operations in paths.values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if parameter["in"] == "query" and schema.get("type") == "string" and not _constrained(schema):
                    schema["pattern"] = _TEXT
    _shared_enums(result)
    for (path, method), values in _PARAMETER_EXAMPLES.items():
        for parameter in paths.get(path, {}).get(method, {}).get("parameters", []):
            if parameter["name"] in values:
                parameter["example"] = values[parameter["name"]]
    job_create_variants(result["components"]["schemas"])
    job_update_target(result["components"]["schemas"])
    for source, method, codes, pointer, target in _LINKS:
        operation = paths.get(source, {}).get(method)
        if operation is None:
            continue
        parameter = target.rsplit("{", 1)[1].rstrip("}")
        links = {
            f"{verb}{name}": {"operationId": operation_id, "parameters": {parameter: f"$response.body#{pointer}"}}
            for verb, name, operation_id in _operations(paths, target)
        }
        for code in codes:
            if code in operation["responses"]:
                operation["responses"][code].setdefault("links", {}).update(links)
    return result


# Query parameters' examples, which a serializer's fields cannot carry: together, a query the
# operation answers (/v1/docs shows them; schemathesis's examples phase sends them).
_PARAMETER_EXAMPLES = {
    ("/v1/schedule/preview", "get"): {"schedule": "30 2 * * *", "timezone": "Europe/London", "count": 5},
}

# Where an answer names an object that other operations act on: a link from the answer (path,
# method, its statuses, the JSON pointer to the id) to every operation under the target path,
# for clients and for stateful testers, which follow them from a list or a create to the object.
_JOB, _EXECUTION, _RUN = "/v1/jobs/{job_id}", "/v1/executions/{execution_id}", "/v1/runs/{run_id}"
_LINKS = (
    ("/v1/jobs", "post", ("200", "201"), "/jobId", _JOB),
    ("/v1/jobs", "get", ("200",), "/results/0/jobId", _JOB),
    ("/v1/jobs/bulk", "post", ("200", "201"), "/jobs/0/jobId", _JOB),
    ("/v1/jobs/{job_id}", "get", ("200",), "/latestExecutions/0/executionId", _EXECUTION),
    ("/v1/jobs/{job_id}/trigger", "post", ("200",), "/executionId", _EXECUTION),
    ("/v1/jobs/{job_id}/executions", "get", ("200",), "/results/0/executionId", _EXECUTION),
    ("/v1/jobs/{job_id}/runs", "get", ("200",), "/results/0/runId", _RUN),
    ("/v1/executions", "get", ("200",), "/results/0/executionId", _EXECUTION),
    ("/v1/executions/{execution_id}/retry", "post", ("200",), "/executionId", _EXECUTION),
    ("/v1/runs/{run_id}", "get", ("200",), "/steps/0/executionId", _EXECUTION),
    ("/v1/events", "post", ("200", "202"), "/eventId", "/v1/events/{event_id}"),
    ("/v1/events", "get", ("200",), "/results/0/eventId", "/v1/events/{event_id}"),
    ("/v1/alerts/rules", "post", ("201",), "/ruleId", "/v1/alerts/rules/{rule_id}"),
    ("/v1/alerts/rules", "get", ("200",), "/results/0/ruleId", "/v1/alerts/rules/{rule_id}"),
    ("/v1/alerts", "get", ("200",), "/results/0/alertId", "/v1/alerts/{alert_id}"),
    ("/v1/dead-letter/groups", "get", ("200",), "/results/0/fingerprint", "/v1/dead-letter/groups/{fingerprint}"),
)


def _shared_enums(result) -> None:
    """A query parameter's enum (a list's filter: `?state=`, `?type=`) refers to the component of
    the same values, which drf-spectacular leaves inline: a client then filters on the very enum
    its answers carry (JobStateEnum), not one of the parameter's own."""
    components = result["components"]["schemas"]
    enums = {frozenset(schema["enum"]): name for name, schema in components.items() if "enum" in schema}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter["schema"]
                holder = schema["items"] if schema.get("type") == "array" else schema
                name = enums.get(frozenset(holder.get("enum", ())))
                if name is not None:
                    holder.clear()
                    holder["$ref"] = f"#/components/schemas/{name}"


def _is_page(serializer) -> bool:
    """Whether an answer is a page of a list, `{"results": [...], …}`, made by the view rather
    than by a paginator (which drf-spectacular recognises)."""
    is_class = isinstance(serializer, type) and issubclass(serializer, serializers.Serializer)
    if not (is_class or isinstance(serializer, serializers.Serializer)):
        return False
    results = force_instance(serializer).fields.get("results")
    return isinstance(results, serializers.ListSerializer)


def _constrained(schema) -> bool:
    return bool({"enum", "pattern", "format"} & set(schema))


def _operations(paths, prefix):
    for path, operations in paths.items():
        if path == prefix or path.startswith(prefix + "/"):
            tail = path[len(prefix) :].strip("/").title() or "Self"
            for method, operation in operations.items():
                yield method.title(), tail, operation["operationId"]
