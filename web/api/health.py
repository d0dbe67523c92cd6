from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from web.health import check_broker, check_database


class HealthApi(APIView):
    """200 when the database and the broker answer; 503 naming what does not."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(responses={200: dict, 503: dict})
    def get(self, request):
        problems = {"database": check_database(), "broker": check_broker()}
        body = {name: problem or "ok" for name, problem in problems.items()}
        healthy = not any(problems.values())
        body["status"] = "ok" if healthy else "unavailable"
        return Response(body, status=200 if healthy else 503)
