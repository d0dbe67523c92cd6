"""The schema's part of the API's HTTP conventions (README, "Errors" and "HTTP conventions"),
a drf-spectacular postprocessing hook after web/schema.py's:

- the one `Error` component (web/errors.py's shape), which every error status of every operation
  refers to: one a view declared without a body gets it, and an operation with a body may answer
  415;
- the `If-Match` parameter of the job operations that honour it, and their 412;
- the headers of the answers: `X-Request-Id` on every one, a job's `ETag`, `Location` on a 201,
  the `RateLimit-*` headers of the creates, `Retry-After` on a 429 or a 503.

Parameters and headers are written out in each operation rather than referred to, so that no
client generator has to resolve a reference to them.
"""

import copy
from typing import Any

from web.errors import CODES
from web.headers import IF_MATCH_PATTERN
from web.schema import ERROR_REF

ERROR = {
    "type": "object",
    "description": (
        'Every error under /v1/ (README, "Errors"). `code` says what happened, for a program; `detail` '
        "says it in a sentence, for a person. An invalid request (`invalid`) names each invalid field beside "
        "them, with a list of messages (or, for an object field, its own fields' errors the same way); an "
        "invalid bulk request lists its invalid jobs in `errors`."
    ),
    "properties": {
        "code": {
            "type": "string",
            "description": "One per status: "
            + ", ".join(f"`{code}` ({status})" for status, code in sorted(CODES.items()))
            + ". A client should treat a code it does not know by its status.",
            "example": "invalid",
        },
        "detail": {"type": "string", "example": "payload.seconds: A valid number is required."},
        "errors": {
            "type": "array",
            "description": "A bulk request's invalid jobs: each its `index` in `jobs` and its invalid fields' "
            "messages by name; nothing was created.",
            "items": {
                "type": "object",
                "properties": {"index": {"type": "integer", "minimum": 0}},
                "required": ["index"],
                "additionalProperties": True,
            },
        },
    },
    "required": ["code", "detail"],
    "additionalProperties": True,
}

_STRING = {"type": "string"}
_SECONDS = {"type": "integer", "minimum": 0}
REQUEST_ID = {
    "description": "The request's id: the caller's own X-Request-Id if it sent a UUID, else a new one. An "
    "audited change's audit row is filed under it.",
    "schema": _STRING,
}
ETAG = {
    "description": 'The version the job\'s definition is at, quoted: `"3"`. Send it back as If-Match to change '
    "the job only if nobody changed it since.",
    "schema": _STRING,
}
LOCATION = {"description": "Where the object created is.", "schema": {"type": "string", "format": "uri"}}
RETRY_AFTER = {"description": "Seconds to wait before trying again.", "schema": _SECONDS}
RATE_LIMIT = {
    "RateLimit-Limit": {"description": "Jobs the tenant may submit per window (a minute).", "schema": _SECONDS},
    "RateLimit-Remaining": {"description": "Jobs it may still submit in this window.", "schema": _SECONDS},
    "RateLimit-Reset": {"description": "Seconds until the window starts afresh.", "schema": _SECONDS},
    "RateLimit-Policy": {"description": "The limit and its window: `60;w=60`.", "schema": _STRING},
}
IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": 'The job\'s ETag as you read it (`"3"`): the change is made only if the job is still at that '
    "version, else 412 and nothing changes. Without it, or with `*`, the change is made whatever the version.",
    "schema": {"type": "string", "pattern": IF_MATCH_PATTERN, "example": '"3"'},
}
PRECONDITION_FAILED = {
    "description": "If-Match named a version the job is no longer at: read it again and redo the change. "
    "The answer's ETag is the job's version now.",
    "headers": {"ETag": ETAG},
    "content": {"application/json": {"schema": ERROR_REF}},
}
MALFORMED_IF_MATCH = {
    "description": "If-Match is not `*` nor entity tags.",
    "content": {"application/json": {"schema": ERROR_REF}},
}
UNSUPPORTED_MEDIA_TYPE = {
    "description": "The body is not `application/json`.",
    "content": {"application/json": {"schema": ERROR_REF}},
}

_JOB = "/v1/jobs/{job_id}"
# The operations that answer a job with its ETag (their 200), and those of them that honour If-Match.
_TAGGED = {(_JOB, "get"), (_JOB, "put"), (_JOB, "patch"), (f"{_JOB}/pause", "post"), (f"{_JOB}/resume", "post")}
_IF_MATCH = {(_JOB, "put"), (_JOB, "patch"), (_JOB, "delete"), (f"{_JOB}/pause", "post"), (f"{_JOB}/resume", "post")}
# The operations counted against a tenant's submit rate.
_RATED = {("/v1/jobs", "post"), ("/v1/jobs/bulk", "post")}


def postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            _conventions(path, method, operation)
    return result


def _conventions(path: str, method: str, operation: dict[str, Any]) -> None:
    responses = operation["responses"]
    if (path, method) in _IF_MATCH:
        operation.setdefault("parameters", []).append(copy.deepcopy(IF_MATCH))
        responses["412"] = copy.deepcopy(PRECONDITION_FAILED)
        responses.setdefault("400", copy.deepcopy(MALFORMED_IF_MATCH))
    if "requestBody" in operation:
        responses.setdefault("415", copy.deepcopy(UNSUPPORTED_MEDIA_TYPE))
    for status, response in responses.items():
        headers = {"X-Request-Id": REQUEST_ID}
        if int(status) >= 400:
            # An error status a view declared with a description alone says its body all the same.
            response.setdefault("content", {"application/json": {"schema": dict(ERROR_REF)}})
        if status in ("429", "503"):
            headers["Retry-After"] = RETRY_AFTER
        if status == "201":
            headers["Location"] = LOCATION
        if status in ("201", "429") and (path, method) in _RATED:
            headers.update(RATE_LIMIT)
        if status == "200" and (path, method) in _TAGGED:
            headers["ETag"] = ETAG
        # Copies: one object in many places would be written as YAML anchors.
        response.setdefault("headers", {}).update(copy.deepcopy(headers))
