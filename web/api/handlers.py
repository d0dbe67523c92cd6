"""GET /v1/handlers: the handlers this server runs (web/handler_catalog.py), by name, paged like
the other lists: what a client may name as a job's `target.handler`, in which pool it runs by
default, and the payload it takes, as JSON Schema."""

from bisect import bisect_left, bisect_right

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers
from rest_framework.pagination import Cursor

from web.handler_catalog import HandlerInfo, handler_catalog
from web.rest import Pagination, refuse_unknown_parameters


class HandlerSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="What a job names as `target.handler`.")
    pool = serializers.CharField(help_text="The pool its jobs run in unless they name another (`target.pool`).")
    atomic = serializers.BooleanField(
        help_text="It runs inside the transaction that records its success: its own database writes commit "
        "with SUCCEEDED or not at all."
    )
    rateLimit = serializers.CharField(
        source="rate_limit",
        allow_null=True,
        help_text="The named rate limit its runs are held to unless a job's target names another "
        '(README, "Rate limits"); null for none.',
    )
    description = serializers.CharField(help_text="What it does: its docstring's first paragraph.")
    payloadSchema = serializers.DictField(
        source="payload_schema",
        help_text='The payload it takes, as JSON Schema; `{"type": "object"}` when any JSON object will do. '
        "A job whose payload does not fit is refused (400 naming the field).",
    )


def _at(name: str, *, reverse: bool) -> Cursor:
    # DRF's cursor carries its position as text (decode_cursor reads it back from the query
    # string as text); its type stubs say an int, which is what its own querysets' orderings use.
    return Cursor(offset=0, reverse=reverse, position=name)  # type: ignore[arg-type]


class HandlerPagination(Pagination):
    """Pages of the handlers, by name: a handful in memory, not rows, so the cursor is the name a
    page ends (or, going back, begins) at, in the other lists' cursor and link format."""

    def paginate_queryset(self, queryset, request, view=None):
        refuse_unknown_parameters(request, self.parameters(view))
        handlers: list[HandlerInfo] = queryset
        self.request = request
        self.base_url = request.build_absolute_uri()
        size = self.get_page_size(request)
        cursor = self.decode_cursor(request)
        names = [handler.name for handler in handlers]
        if cursor is None:
            start, end = 0, size
        elif cursor.reverse:
            end = bisect_left(names, str(cursor.position))
            start = max(0, end - size)
        else:
            start = bisect_right(names, str(cursor.position))
            end = start + size
        page = handlers[start:end]
        self._next = _at(page[-1].name, reverse=False) if page and end < len(names) else None
        self._previous = _at(page[0].name, reverse=True) if page and start > 0 else None
        return page

    def get_next_link(self):
        return self.encode_cursor(self._next) if self._next else None

    def get_previous_link(self):
        return self.encode_cursor(self._previous) if self._previous else None


@extend_schema_view(get=extend_schema(summary="List the handlers this server runs"))
class HandlerListApi(generics.ListAPIView):
    """The handlers this server runs, by name, each with its pool, whether it runs atomically, its
    description and its payload's JSON Schema."""

    serializer_class = HandlerSerializer
    pagination_class = HandlerPagination
    filter_backends: list = []

    def get_queryset(self):
        return handler_catalog()
