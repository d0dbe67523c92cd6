"""The one shape of every error the API answers (README, "Errors"): a JSON object with a
machine-readable `code`, one per status (`CODES`), and a `detail` sentence. An invalid request's
fields keep their keys beside them, as clients read them:

    {"payload": {"nmae": ["unknown field"]}, "code": "invalid", "detail": "payload.nmae: unknown field"}

and a bulk request's invalid items keep their `errors` list, each by `index`.

Every way an error leaves the server under /v1/ goes through here:
- `exception_handler`, DRF's: whatever a view raises (validation, 401, 403, 404, 405, 409, 412,
  415, 429, 503);
- `bad_request`, `permission_denied`, `not_found` and `server_error`, Django's handlers, for what
  happens outside a view: an unknown path, an uncaught exception, a Host not allowed (other paths
  keep Django's pages);
- `error_body` for the answers made before Django (web/request_body.py's 413) and by middleware
  (web/middleware.py's 503).
"""

from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response

# The code of each status; a client branches on the code, and reads `detail` to a person.
CODES = {
    400: "invalid",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    412: "precondition_failed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "server_error",
    503: "unavailable",
}

# The database cannot be reached, refuses more clients ("too many clients already"), or no pooled
# connection came free in time (psycopg_pool's PoolTimeout, an OperationalError): a retry may
# succeed, so these answer 503 with Retry-After, never 500 (here for the API's views, in
# web/middleware.py for the others).
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
DATABASE_UNAVAILABLE_MESSAGE = "the database is unavailable or busy; try again shortly"

# The keys the shape itself uses: an invalid field of one of these names is said in
# `non_field_errors` instead ("detail: unknown field"), as a bulk item's field named `index` is.
_OWN_KEYS = ("code", "detail")


def code_of(status_code: int) -> str:
    return CODES.get(status_code) or ("server_error" if status_code >= 500 else "invalid")


def error_body(status_code: int, detail: str, **fields: Any) -> dict[str, Any]:
    """An error's body: `fields` (what else it names) with its code and detail."""
    return {**fields, "code": code_of(status_code), "detail": detail}


def field_errors_body(errors: Any, status_code: int = status.HTTP_400_BAD_REQUEST) -> dict[str, Any]:
    """An invalid request's body: DRF's errors by field (or a list of whole-request messages),
    with the code and a detail that says the first of them."""
    if not isinstance(errors, dict):
        errors = {"non_field_errors": errors if isinstance(errors, list) else [errors]}
    fields = {name: messages for name, messages in errors.items() if name not in _OWN_KEYS}
    for name in _OWN_KEYS:
        if name in errors:
            fields.setdefault("non_field_errors", [])
            fields["non_field_errors"] = [*fields["non_field_errors"], *_said_apart(name, errors[name])]
    return error_body(status_code, _summary(fields), **fields)


def _said_apart(name: str, messages: Any) -> list[str]:
    return [f"{name}: {line}" for line in _lines(messages)]


def _lines(detail: Any, prefix: str = "") -> list[str]:
    """Nested errors as "target.handler: unknown handler …" lines."""
    if isinstance(detail, dict):
        return [line for key, value in detail.items() for line in _lines(value, f"{prefix}{key}.")]
    if isinstance(detail, list):
        return [line for item in detail for line in _lines(item, prefix)]
    return [f"{prefix.rstrip('.')}: {detail}" if prefix else str(detail)]


def _summary(fields: dict[str, Any]) -> str:
    lines = [line.removeprefix("non_field_errors: ") for line in _lines(fields)] or ["the request is invalid"]
    return lines[0] if len(lines) == 1 else f"{lines[0]} (and {len(lines) - 1} more)"


def shaped(data: Any, status_code: int, *, fields: bool) -> dict[str, Any]:
    """DRF's answer to an exception in the one shape: `fields` when its detail names fields (a
    ValidationError, a parse error about a field), else a whole-request `detail` given its code."""
    if fields or not (isinstance(data, dict) and isinstance(data.get("detail"), str)):
        return field_errors_body(data, status_code)
    return {**data, "code": code_of(status_code)}


def exception_handler(exc, context):
    """DRF's exception handler, for the errors of this project's services too, each in the shape."""
    # Imported here: DRF loads this module while the apps' API modules are being imported.
    from rest_framework.views import exception_handler as drf_exception_handler

    from executions.states import InvalidTransition
    from jobs.states import InvalidJobTransition
    from scheduling.job_changes import StaleVersion
    from scheduling.job_creation import IdempotencyConflict, QuotaExceeded
    from web.headers import etag, rate_limit_headers

    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        from web.audit import audit_failed_authentication

        audit_failed_authentication(context["request"], str(exc.detail))
    if isinstance(exc, IdempotencyConflict):
        return Response(error_body(409, str(exc), field="Idempotency-Key"), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, InvalidJobTransition | InvalidTransition):
        return Response(error_body(409, str(exc)), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, StaleVersion):
        detail = f"{exc}: read the job again (its ETag is now {etag(exc.current)}) and make the change on it"
        return Response(
            error_body(412, detail), status=status.HTTP_412_PRECONDITION_FAILED, headers={"ETag": etag(exc.current)}
        )
    if isinstance(exc, QuotaExceeded):
        return Response(
            error_body(429, str(exc)),
            status=status.HTTP_429_TOO_MANY_REQUESTS,
            headers={"Retry-After": str(exc.retry_after), **rate_limit_headers(exc.rate)},
        )
    if isinstance(exc, DATABASE_UNAVAILABLE):
        return Response(
            error_body(503, DATABASE_UNAVAILABLE_MESSAGE),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(settings.TICKWORK_DB_RETRY_AFTER_SECONDS)},
        )
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = shaped(response.data, response.status_code, fields=isinstance(exc, exceptions.ValidationError))
    return response


# --- Django's handlers (ROOT_URLCONF's handler400, handler403, handler404, handler500) ----------------


def is_api(request: HttpRequest) -> bool:
    return request.path_info == "/v1" or request.path_info.startswith("/v1/")


def bad_request(request: HttpRequest, exception: Exception) -> Any:
    """A request Django refused before any view (a Host not allowed, too many fields)."""
    if not is_api(request):
        return defaults.bad_request(request, exception)
    return JsonResponse(error_body(400, f"the request was refused: {exception}"), status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> Any:
    if not is_api(request):
        return defaults.permission_denied(request, exception)
    return JsonResponse(error_body(403, str(exception) or "this request is not allowed"), status=403)


def not_found(request: HttpRequest, exception: Exception) -> Any:
    """An unknown path under /v1/ (an object that is not there is its view's 404, through DRF)."""
    if not is_api(request):
        return defaults.page_not_found(request, exception)
    detail = f"no such path: {request.path}; GET /v1/ lists the API's endpoints"
    return JsonResponse(error_body(404, detail), status=404)


def server_error(request: HttpRequest) -> Any:
    """An uncaught exception: logged by Django (the `django.request` logger) with its traceback,
    which the answer does not show."""
    if not is_api(request):
        return defaults.server_error(request)
    detail = "the server failed to answer this request; the error is logged"
    return JsonResponse(error_body(500, detail), status=500)
