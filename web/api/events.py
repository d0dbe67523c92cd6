"""POST /v1/events (post an event: what it matches starts), GET /v1/events and /v1/events/{id}."""

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from events.models import EventSource
from events.selectors import event_get, event_list
from events.services import IDEMPOTENCY_WINDOW, event_receive
from executions.clock import db_now
from tenants.selectors import scope_of
from web.api.event_filters import EventFilter
from web.api.event_serializers import EventAcceptedSerializer, EventInputSerializer, EventSerializer
from web.authentication import tenant_to_write_in
from web.rest import Pagination
from web.schema import ERROR_REF

IDEMPOTENCY_CONFLICT = OpenApiResponse(
    ERROR_REF, description="The Idempotency-Key was used with another name or payload."
)

MAX_KEY_LENGTH = 255
_WINDOW_HOURS = int(IDEMPOTENCY_WINDOW.total_seconds() // 3600)
IDEMPOTENCY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "maxLength": MAX_KEY_LENGTH},
    OpenApiParameter.HEADER,
    description=f"The same key, name and payload again (for at least {_WINDOW_HOURS} hours) answer what the first "
    "request did and start nothing; the key with another name or payload, 409.",
)
POST_DESCRIPTION = """Store the event and, in the same transaction, start one run of every ACTIVE event job of the
tenant whose `on` is the event's name and whose `filter` the payload satisfies (each of the filter's keys
present in the payload with an equal JSON value: `1` and `"1"` differ). Paused and cancelled jobs do not
start. An event that matches nothing is stored all the same, with `matched` 0. Answers 202 with what it
started."""


class EventPagination(Pagination):
    """Events, newest received first."""

    ordering = "-received_at"


def idempotency_key_of(request) -> str | None:
    key = request.headers.get("Idempotency-Key") or None
    if key is not None and len(key) > MAX_KEY_LENGTH:
        raise serializers.ValidationError({"Idempotency-Key": [f"must be at most {MAX_KEY_LENGTH} characters"]})
    return key


@extend_schema_view(
    get=extend_schema(
        summary="List events",
        description="The caller's events, newest received first, each with what it started; filter by `name` "
        "and `source`.",
    )
)
class EventListCreateApi(generics.ListAPIView):
    serializer_class = EventSerializer
    filterset_class = EventFilter
    pagination_class = EventPagination

    def get_queryset(self):
        return event_list(scope=scope_of(user=self.request.user))

    @extend_schema(
        summary="Post an event",
        request=EventInputSerializer,
        responses={202: EventAcceptedSerializer, 409: IDEMPOTENCY_CONFLICT},
        parameters=[IDEMPOTENCY_PARAMETER],
        description=POST_DESCRIPTION,
    )
    def post(self, request):
        key = idempotency_key_of(request)
        serializer = EventInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        received = event_receive(
            tenant=tenant_to_write_in(request, data.get("tenant"), what="events"),
            name=data["name"],
            payload=data["payload"],
            source=EventSource.API,
            now=db_now(),
            idempotency_key=key,
        )
        # 202 for a replay too: the same request answers the same, however often it is sent.
        return Response(EventAcceptedSerializer(received.event).data, status=status.HTTP_202_ACCEPTED)


class EventDetailApi(APIView):
    @extend_schema(
        summary="Get an event",
        description="An event as it was received (name, payload, source), and the executions and runs it started.",
        responses=EventSerializer,
    )
    def get(self, request, event_id):
        event = event_get(scope=scope_of(user=request.user), event_id=event_id)
        if event is None:
            raise Http404("no such event")
        return Response(EventSerializer(event).data)
