"""POST /v1/hooks/{tenant}/{event_name}: an event from a sender without a token (a payment
provider, a CI system), signed with the tenant's inbound secret instead. Once the signature
verifies it is POST /v1/events with the body as the payload and the path's name, source `webhook`.

The signature is the authentication: `HookSignatureAuthentication` reads the raw body (the MAC is
over its bytes, so it is read before anything parses it) and answers 401 for anything that does not
verify, alike, with nothing stored. No session: no CSRF token is asked for.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import authentication, exceptions, serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.utils import json
from rest_framework.views import APIView

from events.hooks import hook_sender
from events.models import EVENT_NAME_MAX_LENGTH, EVENT_NAME_PATTERN, EventSource
from events.services import event_receive
from executions.clock import db_now
from tenants import signing
from tenants.models import Tenant
from web import json_input
from web.api.event_serializers import EventAcceptedSerializer, EventNameField
from web.api.events import IDEMPOTENCY_CONFLICT, IDEMPOTENCY_PARAMETER, idempotency_key_of
from web.api.job_fields import payload_problem
from web.rest import PayloadTooLarge, request_body_limit
from web.schema import ERROR_REF

SIGNATURE_HELP = (
    f'`{signing.SIGNATURE_HEADER}: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" with the tenant\'s '
    "inbound secret>` (`manage.py inbound_secret SLUG`). `t` must be within 5 minutes of the server's time; "
    "several `v1=` may be given (any one that verifies will do), e.g. while a rotated secret's hour lasts."
)
UNVERIFIED = (
    f"the request's {signing.SIGNATURE_HEADER} is missing or does not verify: it must be t=<unix seconds>,"
    "v1=<HMAC-SHA256 of '<t>.<body>' with the tenant's inbound secret>, made within 5 minutes"
)

UNVERIFIED_HELP = (
    "The signature is missing, malformed or wrong, its `t` is more than 5 minutes from the server's time, or the "
    "tenant is unknown (which of these is not said); nothing was stored."
)


class HookSender:
    """The caller of a webhook whose signature verified: acts for exactly its tenant."""

    is_authenticated = True
    is_staff = False

    def __init__(self, tenant: Tenant) -> None:
        self.tenant = tenant

    def __str__(self) -> str:
        return f"webhook sender of {self.tenant.slug}"


def raw_body(request) -> bytes:
    """The request's body as sent, refused (400 naming `payload`) before it is read when larger than
    the API reads (the payload limit and room besides, as for POST /v1/events)."""
    limit = request_body_limit()
    length = request.META.get("CONTENT_LENGTH") or "0"
    if not length.isdigit() or int(length) > limit:
        raise PayloadTooLarge({"payload": [f"a webhook's body is its payload; it may be at most {limit} bytes"]})
    return request.body


class HookSignatureAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        slug = request.parser_context["kwargs"].get("tenant", "")
        tenant = hook_sender(
            slug=slug, header=request.headers.get(signing.SIGNATURE_HEADER), body=raw_body(request), now=db_now()
        )
        if tenant is None:
            raise exceptions.AuthenticationFailed(UNVERIFIED)
        return HookSender(tenant), None

    def authenticate_header(self, request) -> str:
        # A 401 must name a scheme (RFC 9110); this one is ours.
        return "Tickwork-Signature"


class HookSignatureScheme(OpenApiAuthenticationExtension):
    target_class = "web.api.hooks.HookSignatureAuthentication"
    name = "webhookSignature"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": signing.SIGNATURE_HEADER, "description": SIGNATURE_HELP}


def hook_payload(body: bytes) -> dict:
    """The webhook's body as an event's payload: a JSON object ({} for an empty body), checked as
    a payload field of POST /v1/events is (nesting, unstorable text, size); 400 naming `payload`."""
    if not body.strip():
        return {}
    try:
        parse_constant = json.strict_constant if api_settings.STRICT_JSON else None
        payload = json_input.loads(body.decode("utf-8"), field="payload", parse_constant=parse_constant)
    except json_input.JSONInputError as exc:
        raise serializers.ValidationError({"payload": [exc.message]}) from None
    except ValueError as exc:  # includes UnicodeDecodeError
        raise serializers.ValidationError({"payload": [f"is not JSON: {exc}"]}) from None
    if problem := payload_problem(payload):
        raise serializers.ValidationError({"payload": [problem]})
    return payload


class HookPathSerializer(serializers.Serializer):
    event_name = EventNameField()


class HookApi(APIView):
    authentication_classes = [HookSignatureAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Receive a signed webhook as an event",
        # Not drf-spectacular's `hooks_create`: it creates no hook, it posts an event.
        operation_id="hooks_post_event",
        request={"application/json": {"type": "object", "additionalProperties": True}},
        responses={
            202: EventAcceptedSerializer,
            401: OpenApiResponse(ERROR_REF, description=UNVERIFIED_HELP),
            409: IDEMPOTENCY_CONFLICT,
        },
        parameters=[
            OpenApiParameter(
                "tenant",
                {"type": "string", "maxLength": 64, "pattern": "^[-a-zA-Z0-9_]+$"},
                OpenApiParameter.PATH,
                description="The tenant's slug.",
            ),
            OpenApiParameter(
                "event_name",
                {"type": "string", "maxLength": EVENT_NAME_MAX_LENGTH, "pattern": EVENT_NAME_PATTERN},
                OpenApiParameter.PATH,
                description="The event's name, as `name` of POST /v1/events.",
            ),
            IDEMPOTENCY_PARAMETER,
        ],
        description="An event from a sender without a token: the body (a JSON object) is its payload and the path "
        f"names it; it then acts as POST /v1/events. {SIGNATURE_HELP} A signature that is missing, malformed, "
        "wrong, older or newer than 5 minutes, or for an unknown tenant is a 401, and nothing is stored.",
    )
    def post(self, request, tenant, event_name):
        path = HookPathSerializer(data={"event_name": event_name})
        path.is_valid(raise_exception=True)
        payload = hook_payload(request.body)
        received = event_receive(
            tenant=request.user.tenant,
            name=path.validated_data["event_name"],
            payload=payload,
            source=EventSource.WEBHOOK,
            now=db_now(),
            idempotency_key=idempotency_key_of(request),
        )
        return Response(EventAcceptedSerializer(received.event).data, status=status.HTTP_202_ACCEPTED)
