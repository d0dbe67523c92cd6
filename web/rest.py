"""REST plumbing shared by every app: body limit, pagination (the error shape is web/errors.py)."""

import difflib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Q, QuerySet
from rest_framework import ISO_8601, exceptions, renderers, serializers, status
from rest_framework.fields import is_simple_callable
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.parsers import BaseParser
from rest_framework.settings import api_settings
from rest_framework.utils import json
from rest_framework.utils.urls import remove_query_param

from executions.states import ExecutionState
from store import store
from web import json_input


class PayloadTooLarge(exceptions.ParseError):
    status_code = status.HTTP_400_BAD_REQUEST


# Room in a request body for a job's fields besides its payload (name, schedule, target, ...).
BODY_ROOM_BYTES = 16 * 1024


def request_body_limit() -> int:
    """The largest request body the API reads: the payload limit plus room for the rest."""
    return settings.TICKWORK_MAX_PAYLOAD_BYTES + BODY_ROOM_BYTES


def _body_limit_message(size: str) -> str:
    payload_limit = settings.TICKWORK_MAX_PAYLOAD_BYTES
    return (
        f"the request body is {size}; a request body may be at most {request_body_limit()} bytes "
        f"(a payload of up to {payload_limit} bytes, TICKWORK_MAX_PAYLOAD_BYTES, plus {BODY_ROOM_BYTES} "
        "for the other fields)"
    )


class LimitedJSONParser(BaseParser):
    """JSON only, and no bigger than the payload limit plus room for the job's other fields,
    refused before it is read.

    Deliberately not a JSONParser subclass: DRF reads `request.body` for those before calling
    `parse`, which trips Django's DATA_UPLOAD_MAX_MEMORY_SIZE on a big body (an HTML error,
    not our JSON one) and buffers whatever the client sent. Here the stream is read only up
    to the limit, so a body without a Content-Length cannot get past it either.
    """

    media_type = "application/json"
    renderer_class = renderers.JSONRenderer

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        request = parser_context.get("request")
        limit = self.body_limit()
        length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        if length > limit:
            raise PayloadTooLarge(self.too_large(f"{length} bytes"))
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(self.too_large(f"over {limit} bytes"))
        try:
            text = raw.decode(parser_context.get("encoding") or settings.DEFAULT_CHARSET)
            parse_constant = json.strict_constant if api_settings.STRICT_JSON else None
            data = self.loads(text, parse_constant=parse_constant)
        except json_input.JSONInputError as exc:
            raise exceptions.ParseError({exc.field or "non_field_errors": [exc.message]}) from None
        except ValueError as exc:  # includes UnicodeDecodeError
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        if not isinstance(data, dict):
            raise exceptions.ParseError({"non_field_errors": ["the request body must be a JSON object"]})
        return data

    def body_limit(self) -> int:
        return request_body_limit()

    def too_large(self, size: str) -> dict[str, list[str]]:
        return {"payload": [_body_limit_message(size)]}

    def loads(self, text: str, *, parse_constant):
        return json_input.loads(text, parse_constant=parse_constant)


class BulkJSONParser(LimitedJSONParser):
    """A bulk request's body, `{"jobs": [...]}`: up to the web role's own request limit
    (TICKWORK_MAX_REQUEST_BYTES, 1 MiB by default), which holds 1,000 ordinary jobs (a few hundred
    bytes each) but not 1,000 maximal payloads; each item's payload is still held to its own
    limit. Items nest as deep as single bodies may; what cannot be stored is reported per item."""

    def body_limit(self) -> int:
        return settings.TICKWORK_MAX_REQUEST_BYTES

    def too_large(self, size: str) -> dict[str, list[str]]:
        return {
            "jobs": [
                f"the request body is {size}; a bulk request body may be at most {self.body_limit()} bytes"
                " (TICKWORK_MAX_REQUEST_BYTES): send fewer jobs per request"
            ]
        }

    def parse(self, stream, media_type=None, parser_context=None):
        self.storable = False
        data = super().parse(stream, media_type, parser_context)
        request = (parser_context or {}).get("request")
        if request is not None:
            # Whether the view may skip `json_input.field_errors` for each item: its text shows
            # nothing that could parse to a value refused (json_input.may_hold_unstorable).
            request.body_storable = self.storable
        return data

    def loads(self, text: str, *, parse_constant):
        data = json_input.loads_batch(text, parse_constant=parse_constant)
        self.storable = not json_input.may_hold_unstorable(text)
        return data


def representer(serializer: serializers.Serializer) -> Callable[[Any], dict[str, Any]]:
    """`serializer.to_representation`, planned once for many objects: DRF finds each field's
    source and asks whether it is callable anew for every object, which for a 1,000-job answer
    took longer than writing the jobs. The same fields in the same order, read and converted by
    the same fields' `to_representation` (a nested serializer is planned the same way)."""
    plan: list[tuple[str, tuple[str, ...], Callable[[Any], Any]]] = []
    for name, field in serializer.fields.items():
        if field.write_only:
            continue
        if isinstance(field, serializers.Serializer):
            convert = representer(field)
        elif _utc_iso_8601(field):
            convert = _utc_text()
        else:
            convert = _plain(field) or field.to_representation
        plan.append((name, tuple(field.source_attrs), convert))

    # Whether a method (a model's `get_FOO_display`) is called: asked once per attribute of a class,
    # not per object (is_simple_callable reads its signature). Not per function: a partialmethod
    # (Django's get_FOO_display) is a new object at each access.
    simple: dict[tuple[type, str], bool] = {}

    def represent(instance: Any) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name, attrs, convert in plan:
            value = instance
            for attr in attrs:
                holder, value = value, getattr(value, attr)
                if callable(value):
                    key = (type(holder), attr)
                    if key not in simple:
                        simple[key] = is_simple_callable(value)
                    if simple[key]:
                        value = value()
            data[name] = None if value is None else convert(value)
        return data

    return represent


def _plain(field: serializers.Field) -> Callable[[Any], Any] | None:
    """What DRF's own to_representation of `field` comes to, called directly: for a 1,000-job
    answer's 25,000 values, DRF's method per value was a fifth of the answer."""
    method = type(field).to_representation
    if method is serializers.CharField.to_representation:
        return str
    if method is serializers.IntegerField.to_representation:
        return int
    if method is serializers.BooleanField.to_representation:
        general = field.to_representation
        return lambda value: value if type(value) is bool else general(value)
    if method is serializers.JSONField.to_representation and not field.binary:  # type: ignore[attr-defined]
        return _as_is
    if method is serializers.SerializerMethodField.to_representation:
        return getattr(field.parent, field.method_name)  # type: ignore[attr-defined]
    return None


def _as_is(value: Any) -> Any:
    return value


def _utc_iso_8601(field: serializers.Field) -> bool:
    """Whether `field` writes times as DRF's DateTimeField does in this project: ISO 8601, in
    the current timezone, which is UTC (settings.TIME_ZONE; nothing activates another)."""
    return (
        type(field).to_representation is serializers.DateTimeField.to_representation
        and str(getattr(field, "format", api_settings.DATETIME_FORMAT)).lower() == ISO_8601
        and not hasattr(field, "timezone")
        and settings.USE_TZ
        and settings.TIME_ZONE == "UTC"
    )


def _in_utc_iso_8601(value: Any) -> Any:
    """DateTimeField.to_representation for such a field: the same text, without its lookup of
    the current timezone for every value (a tenth of a 1,000-job answer's time, profiled)."""
    if isinstance(value, str):
        return value
    text = (value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _utc_text() -> Callable[[Any], Any]:
    """_in_utc_iso_8601 for one field, remembering its last value: the rows of one answer mostly
    share their times (a batch's jobs one creation time, often one runAt), and writing the text
    was a fifth of a 1,000-job answer. Equal times are one instant, so one UTC text."""
    last: tuple[Any, Any] = (None, None)

    def convert(value: Any) -> Any:
        nonlocal last
        seen, text = last  # one tuple, read once: another thread may replace it meanwhile
        if value is seen or (type(value) is datetime and type(seen) is datetime and value == seen):
            return text
        text = _in_utc_iso_8601(value)
        last = (value, text)
        return text

    return convert


class GivenIfEmpty:
    """A query parameter's field (mixed in before the field class) for which present and empty
    (`?pageSize=`) is a value to validate, and so refused, not the parameter left out: DRF,
    reading form input, takes an empty one as absent, and the schema says it is not."""

    field_name: str | None

    def get_value(self, dictionary):
        if self.field_name in dictionary and dictionary[self.field_name] == "":
            return ""
        return super().get_value(dictionary)  # type: ignore[misc]  # the field class's, after this mixin


def refuse_unknown_parameters(request, known: Iterable[str]) -> None:
    """A 400 naming each query parameter the list does not take (`?page_size=`, `?ordering=`, a
    misspelt filter), which would otherwise be ignored without a word, and echoed into `next`."""
    known = sorted(known)
    unknown = sorted(set(request.query_params) - set(known))
    if unknown:
        raise exceptions.ValidationError({name: [_unknown_parameter(name, known)] for name in unknown})


def _unknown_parameter(name: str, known: list[str]) -> str:
    takes = f"this list takes {', '.join(known)}" if known else "this list takes no parameter"
    near = difflib.get_close_matches(name, known, n=1)
    return f"unknown parameter; did you mean {near[0]}? {takes}" if near else f"unknown parameter; {takes}"


class Pagination(CursorPagination):
    """Cursor pages: stable under inserts, and no COUNT(*) over millions of rows. A page of a
    list is always in the list's own order (newest first): there is no `ordering` to choose, and
    a parameter the list does not know is refused (`refuse_unknown_parameters`).

    Rows that tie on the list's order key (a bulk request's jobs share one `created_at`, a
    midnight herd's executions one `scheduledFor`) are in primary key order, and a cursor names
    the row a page ends at by both: the next page is what comes after that pair. DRF's cursor
    named the key alone and counted its way past the rows that tie on it, which assumes the
    database returns ties in the same order every time (it need not, and a row's update moves
    it) and stops counting at 1,000, so a walk over more ties than that went round in a circle."""

    page_size_query_param = "pageSize"
    max_page_size = 500
    ordering = "-created_at"

    def paginate_queryset(self, queryset, request, view=None):
        refuse_unknown_parameters(request, self.parameters(view))
        self.request = request
        self.base_url = request.build_absolute_uri()
        self.page_size = self.get_page_size(request)
        self.cursor = self.decode_cursor(request)  # its offset, which we never write, is ignored
        reverse = bool(self.cursor and self.cursor.reverse)
        # DRF's stubs say a position is an int; DRF keeps the text as it came.
        self.position: str | None = None if self.cursor is None else cast(str | None, self.cursor.position)
        position = None if self.position is None else self._read_position(queryset, self.position)
        keys = [_flipped(key) for key in self._keys()] if reverse else self._keys()
        queryset = queryset.order_by(*keys)
        if position is not None:
            queryset = queryset.filter(_past(keys, position))
        rows = self.rows(queryset, keys, self.page_size + 1)
        self.page = rows[: self.page_size]
        more = len(rows) > self.page_size
        if reverse:
            self.page.reverse()
        # Pages on the far side of the cursor exist if there was a cursor (what it came from).
        self.has_next, self.has_previous = (position is not None, more) if reverse else (more, position is not None)
        return self.page

    def rows(self, queryset: QuerySet, keys: list[str], limit: int) -> list:
        """The first `limit` rows of `queryset`, ordered by `keys` and past the cursor already."""
        return list(queryset[:limit])

    def get_next_link(self):
        if not self.has_next:
            return None
        if not self.page:  # nothing before the cursor going back: the next page is the first
            return remove_query_param(cast(str, self.base_url), self.cursor_query_param)
        return self._link(reverse=False, position=self._position_of(self.page[-1]))

    def get_previous_link(self):
        if not self.has_previous:
            return None
        return self._link(reverse=True, position=self._position_of(self.page[0]) if self.page else self.position)

    def _link(self, *, reverse: bool, position: str | None) -> str:
        return self.encode_cursor(Cursor(offset=0, reverse=reverse, position=cast(Any, position)))

    def _keys(self) -> list[str]:
        """The list's order, then its primary key in the same direction: a total order."""
        ordering = self.ordering if isinstance(self.ordering, str) else self.ordering[0]
        return [ordering, "-pk" if ordering.startswith("-") else "pk"]

    def _position_of(self, row) -> str:
        value = getattr(row, self._keys()[0].lstrip("-"))
        return f"{value.isoformat() if isinstance(value, datetime) else value}|{row.pk}"

    def _read_position(self, queryset: QuerySet, position: str) -> tuple[Any, Any]:
        """The (key, primary key) a cursor names, as the model's fields read them; a cursor not
        made by this list (tampered with, or from another list) is a 404 as DRF's are."""
        model = queryset.model
        value, bar, pk = position.rpartition("|")
        try:
            if not bar:
                raise ValueError("no primary key")
            key = model._meta.get_field(self._keys()[0].lstrip("-")).to_python(value)
            return key, model._meta.pk.to_python(pk)
        except (ValueError, TypeError, DjangoValidationError):
            raise exceptions.NotFound(self.invalid_cursor_message) from None

    def parameters(self, view) -> set[str]:
        """What the query of `view`'s list may hold: its page's parameters and its filters."""
        filterset = getattr(view, "filterset_class", None)
        return {self.cursor_query_param, self.page_size_query_param, *(filterset.base_filters if filterset else ())}

    def get_page_size(self, request):
        # Refused rather than quietly replaced by the default, as any other bad parameter is.
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise exceptions.ValidationError(
                {self.page_size_query_param: [f"must be a whole number from 1 to {self.max_page_size}"]}
            )
        return int(raw)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
        return parameters


def _flipped(key: str) -> str:
    return key[1:] if key.startswith("-") else f"-{key}"


def _past(keys: list[str], position: tuple[Any, Any]) -> Q:
    """The rows after `position` in the order `keys` (the list's key, then the primary key). The
    first condition alone is a range of the key's index; the second says where in it ties end."""
    (key, tie), (value, pk) = keys, position
    field, tie_field = key.lstrip("-"), tie.lstrip("-")
    before = "lt" if key.startswith("-") else "gt"
    tie_before = "lt" if tie.startswith("-") else "gt"
    return Q(**{f"{field}__{before}e": value}) & (  # lte or gte: the range, ties included
        Q(**{f"{field}__{before}": value}) | Q(**{field: value, f"{tie_field}__{tie_before}": pk})
    )


class ExecutionPagination(Pagination):
    """Executions, newest scheduled first."""

    ordering = "-scheduled_for"


class StateMergedExecutionPagination(ExecutionPagination):
    """A tenant's executions (or everyone's, for staff), newest scheduled first, in any states.

    No index orders them by scheduledFor across states: those that do lead with the state (and the
    tenant), and leave out the rows in flight, which have partial indexes of their own
    (executions.models). So a page is read state by state where the store can (PostgreSQL), each
    state's first rows past the cursor by its own index, and merged: a few short walks, where one
    query over every state read and sorted all of a tenant's rows (over 300 ms at 200,000 of them).
    A list of one job's or one run's executions has an index in that order already, and is read
    as it is."""

    def rows(self, queryset: QuerySet, keys: list[str], limit: int) -> list:
        assert self.request is not None  # set by paginate_queryset, which calls this
        params = self.request.query_params
        if "jobId" in params or "runId" in params:
            return super().rows(queryset, keys, limit)
        states = list(dict.fromkeys(params.getlist("state"))) or ExecutionState.values
        return store().first_of_parts(queryset, parts=[Q(state=state) for state in states], order=keys, limit=limit)
