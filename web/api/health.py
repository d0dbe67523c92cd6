from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts.selectors import any_rule_enabled
from executions.clock import db_now
from store.replica.routing import REPLICA
from web.errors import error_body
from web.health import check_broker, check_database, check_replica, check_role, check_workers
from web.schema import ERROR_REF

# What makes the scheduler unavailable (503), and what only degrades it (200, said).
_VITAL = ("database", "broker", "dispatcher")


class HealthApi(APIView):
    """200 when the database and the broker answer and a dispatcher has been seen within its
    bound; 503 naming what is wrong otherwise. A missing sweeper, no live worker, or no alerter
    while an alert rule is on, is said (status "degraded") but answers 200: the API still takes
    and keeps work."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(
        summary="Check the scheduler's health",
        responses={
            200: dict,
            503: OpenApiResponse(
                ERROR_REF, description="Unavailable: the error's code and detail, beside the checks as a 200 has them."
            ),
        },
    )
    def get(self, request):
        problems: dict[str, str | None] = {"database": check_database(), "broker": check_broker()}
        body: dict = {}
        if problems["database"] is None:
            now = db_now()
            problems["dispatcher"], dispatcher = check_role("dispatcher", now)
            problems["sweeper"], sweeper = check_role("sweeper", now)
            problems["workers"], workers = check_workers(now)
            alerter_problem, alerter = check_role("alerter", now)
            # No alerter is only a problem when there is something for it to judge.
            problems["alerter"] = alerter_problem if alerter_problem and any_rule_enabled() else None
            if REPLICA in settings.DATABASES:
                # Reads that fall back to the primary still answer: degraded, not unavailable.
                problems["replica"] = check_replica()
            body["roles"] = {"dispatcher": dispatcher, "sweeper": sweeper, "alerter": alerter, "workers": workers}
        body.update({name: problem or "ok" for name, problem in problems.items()})
        unavailable = any(problems.get(name) for name in _VITAL)
        body["status"] = "unavailable" if unavailable else ("degraded" if any(problems.values()) else "ok")
        if unavailable:
            # An error as every other is (web/errors.py), with the checks beside it.
            said = "; ".join(problems[name] or "" for name in _VITAL if problems.get(name))
            body.update(error_body(503, f"the scheduler is unavailable: {said}"))
        return Response(body, status=503 if unavailable else 200)
