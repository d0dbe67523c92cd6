"""Django middleware of the web role: the request id, answers when the database is unavailable,
and the Content-Security-Policy header."""

import re
import uuid

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpResponse, JsonResponse

from telemetry import tracing
from web.errors import DATABASE_UNAVAILABLE, DATABASE_UNAVAILABLE_MESSAGE, error_body

# A request id a caller (or its proxy) may give: a UUID, with or without its hyphens, which is
# what the audit log files a request under. Anything else is replaced, never echoed.
_REQUEST_ID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")


def request_id_of(given: str | None) -> str:
    """The id of a request: the one it came with (`X-Request-Id`) if valid, else a new one."""
    if given is not None and _REQUEST_ID.fullmatch(given.strip()):
        return given.strip()
    return str(uuid.uuid4())


class RequestIdMiddleware:
    """Every response carries `X-Request-Id`: the request's own if it came with a valid one, or a
    new one. The audit row of an API change is filed under it (web/audit.py), so a caller, or a
    proxy that logs it, can find the row. First in the chain, so every answer has it: errors,
    404s, CORS preflights. (A body refused before Django gets one in web/request_body.py.)"""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        request.request_id = request_id_of(request.headers.get("X-Request-Id"))
        response = self.get_response(request)
        response["X-Request-Id"] = request.request_id
        return response


class DatabaseUnavailableMiddleware:
    """503 with Retry-After for a view (the admin's, the dashboard's) that found no database. The
    API's views answer the same through DRF's exception handler (web/rest.py)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, DATABASE_UNAVAILABLE):
            return None
        if "text/html" in request.headers.get("Accept", ""):
            response = HttpResponse(DATABASE_UNAVAILABLE_MESSAGE, status=503, content_type="text/plain")
        else:
            response = JsonResponse(error_body(503, DATABASE_UNAVAILABLE_MESSAGE), status=503)
        response["Retry-After"] = str(settings.TICKWORK_DB_RETRY_AFTER_SECONDS)
        return response


class TracingMiddleware:
    """A server span per request (telemetry/tracing.py), continuing the caller's trace when its
    request carries a `traceparent` header: the executions a request makes join its trace. Not in
    the chain at all when tracing is off."""

    def __init__(self, get_response) -> None:
        if not tracing.enabled():
            raise MiddlewareNotUsed()
        self.get_response = get_response

    def __call__(self, request):
        with tracing.server_span(request.method, request.headers) as span:
            response = self.get_response(request)
            route = request.resolver_match.route if request.resolver_match else None
            tracing.served(span, method=request.method, route=route, status=response.status_code)
        return response


class ContentSecurityPolicyMiddleware:
    """Sends settings.CONTENT_SECURITY_POLICY on every response that has none of its own."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if settings.CONTENT_SECURITY_POLICY:
            response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


def login_locked_out(request, original_response=None, credentials=None):
    """django-axes' answer to a login attempt while locked out: 429, saying when to come back."""
    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    response = HttpResponse(
        f"Too many failed logins. Try again in {max(1, seconds // 60)} minutes.\n",
        status=429,
        content_type="text/plain",
    )
    response["Retry-After"] = str(seconds)
    return response
