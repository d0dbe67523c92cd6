"""REST plumbing shared by every app: body limit, pagination, error shape."""

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.pagination import CursorPagination
from rest_framework.parsers import JSONParser
from rest_framework.response import Response


class PayloadTooLarge(exceptions.ParseError):
    status_code = status.HTTP_400_BAD_REQUEST


class LimitedJSONParser(JSONParser):
    """JSON only, and no bigger than the payload limit plus room for the job's other fields,
    refused before it is parsed."""

    def parse(self, stream, media_type=None, parser_context=None):
        request = (parser_context or {}).get("request")
        limit = settings.TICKWORK_MAX_PAYLOAD_BYTES + 16 * 1024
        length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        if length > limit:
            raise PayloadTooLarge({"payload": [f"request body is {length} bytes; the limit is {limit}"]})
        data = super().parse(stream, media_type, parser_context)
        if not isinstance(data, dict):
            raise exceptions.ParseError({"non_field_errors": ["the request body must be a JSON object"]})
        return data


class Pagination(CursorPagination):
    """Cursor pages: stable under inserts, and no COUNT(*) over millions of rows."""

    page_size_query_param = "pageSize"
    max_page_size = 500
    ordering = "-created_at"


def exception_handler(exc, context):
    # Imported here: DRF loads this module while the apps' API modules are being imported.
    from rest_framework.views import exception_handler as drf_exception_handler

    from executions.states import InvalidTransition
    from jobs.services import IdempotencyConflict, QuotaExceeded
    from jobs.states import InvalidJobTransition

    if isinstance(exc, IdempotencyConflict):
        return Response({"detail": str(exc), "field": "Idempotency-Key"}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, InvalidJobTransition | InvalidTransition):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, QuotaExceeded):
        return Response({"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS)
    return drf_exception_handler(exc, context)
