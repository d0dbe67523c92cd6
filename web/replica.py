"""Reads on a replica, per request (README, "Reads on a replica"; store/replica/): a GET or HEAD
of the API (/v1/) or the dashboard (/dashboard/) reads the replica, within the rules of
store/replica/routing.py; any other request marks its client as having written, so that the
client's reads go to the primary for the window after. Installed only when DATABASE_REPLICA_URL
is set (scheduler_project/settings.py)."""

from django.http import HttpRequest, HttpResponse

from store.replica.health import replica_health
from store.replica.routing import UNKNOWN, ReadScope, read_scope
from store.replica.writes import note_write, wrote_recently

READS = ("GET", "HEAD")
# OPTIONS (a CORS preflight) neither reads a page nor writes.
NEITHER = ("OPTIONS",)
ROUTED_PATHS = ("/v1/", "/dashboard/")
_NOT_CHECKED = object()  # `request.auth` before DRF has looked at the credentials


def client_of(request: HttpRequest) -> str | None:
    """Who a request acts for, as the write marker names it: a bearer token's tenant (any token of
    it: a tenant reads its own writes, whichever of its services wrote), a session's user, "" for
    no one; UNKNOWN while a bearer token is not checked yet (DRF checks it in the view, on the
    primary, and then sets `request.auth`)."""
    auth = getattr(request, "auth", _NOT_CHECKED)
    tenant_id = getattr(auth, "tenant_id", None)
    if tenant_id is not None:
        return f"tenant:{tenant_id}"
    if auth is _NOT_CHECKED and request.headers.get("Authorization", "").lower().startswith("bearer "):
        return UNKNOWN
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and getattr(user, "pk", None) is not None:
        return f"user:{user.pk}"
    return ""


class ReplicaReadsMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in READS:
            response = self.get_response(request)
            if request.method not in NEITHER and (client := client_of(request)):
                note_write(client)
            return response
        if not request.path.startswith(ROUTED_PATHS):
            return self.get_response(request)
        health = replica_health()
        scope = ReadScope(lambda: client_of(request), usable=health.usable, wrote_recently=wrote_recently)
        with read_scope(scope):
            response = self.get_response(request)
        if scope.read_replica and response.status_code == 503:
            # The views answer 503 when a read fails for want of its database (web/errors.py,
            # web/middleware.py): the replica went away under this request, or had no connection
            # free. The request is asked again of the primary; a look at the replica now says
            # which (and sends the next requests' reads to the primary if it is gone).
            health.check()
            with read_scope(None):
                response = self.get_response(request)
        return response
