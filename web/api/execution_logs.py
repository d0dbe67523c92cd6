"""`GET /v1/executions/{id}/logs`: what the handler logged during each attempt (readmodels/logs.py).

Paged by position, not by DRF's cursor: a line's place is (attempt, seq), and `after=<attempt>.<seq>`
asks for the lines after that one, in order. `next` is this query with `after` at the page's
last line; a client that tails a running execution keeps asking with its last line's `after`
(`next` is null when there is nothing more yet). One parameter serves both, and a line logged
later by an earlier attempt's worker (its lease had moved on) is still found under its attempt.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from readmodels.logs import log_dropped, log_lines
from web.api.executions import execution_or_404
from web.rest import GivenIfEmpty

PAGE_SIZE = 500
MAX_PAGE_SIZE = 1000
# Nine digits: every attempt and seq fits PostgreSQL's integer, so no value overflows a comparison.
AFTER_PATTERN = r"^[0-9]{1,9}\.[0-9]{1,9}$"


class ExecutionLogLineSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(help_text="The attempt that logged it.")
    seq = serializers.IntegerField(help_text="Its place in the attempt's lines, from 1.")
    time = serializers.DateTimeField(source="at", help_text="When it was logged, by the worker's clock.")
    level = serializers.CharField(help_text="DEBUG, INFO, WARNING, ERROR, CRITICAL, or the level a handler named.")
    logger = serializers.CharField(
        help_text="The logger's name; the handler's name for a ctx.log line; `tickwork` for the line that says "
        "how many lines were dropped."
    )
    message = serializers.CharField(help_text="The text, with a traceback if one was logged; cut past the line limit.")


class ExecutionLogDroppedSerializer(serializers.Serializer):
    attempt = serializers.IntegerField()
    lines = serializers.IntegerField(help_text="Lines not kept: logged past the attempt's limit.")


class ExecutionLogPageSerializer(serializers.Serializer):
    results = ExecutionLogLineSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="The next page; null when there are no more lines yet.")
    dropped = ExecutionLogDroppedSerializer(
        many=True, help_text="The attempts (of those asked for) that logged more lines than they keep."
    )


class _QueryInteger(GivenIfEmpty, serializers.IntegerField):
    pass


class _QueryRegex(GivenIfEmpty, serializers.RegexField):
    pass


class ExecutionLogQuerySerializer(serializers.Serializer):
    attempt = _QueryInteger(min_value=1, max_value=2**31 - 1, required=False, help_text="Only this attempt's lines.")
    after = _QueryRegex(
        AFTER_PATTERN,
        required=False,
        help_text="Only the lines after this one, as <attempt>.<seq> (e.g. 2.150): the next page, or a tail.",
        error_messages={"invalid": "Give the line to continue after as <attempt>.<seq>, e.g. 2.150."},
    )
    pageSize = _QueryInteger(min_value=1, max_value=MAX_PAGE_SIZE, required=False)


class ExecutionLogsApi(APIView):
    @extend_schema(
        summary="Read an execution's logs",
        parameters=[ExecutionLogQuerySerializer],
        responses=ExecutionLogPageSerializer,
        description=f"The lines the handler logged (ctx.log and the standard logging of its thread), in order: "
        f"by attempt, then seq; {PAGE_SIZE} a page unless pageSize says otherwise. Each attempt keeps at most "
        "TICKWORK_LOG_LINES_PER_ATTEMPT lines; past that one line says how many more were dropped.",
    )
    def get(self, request, execution_id):
        execution = execution_or_404(request, execution_id)
        query = ExecutionLogQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        attempt = query.validated_data.get("attempt")
        after = query.validated_data.get("after")
        size = query.validated_data.get("pageSize", PAGE_SIZE)
        position = None
        if after:
            after_attempt, after_seq = after.split(".")
            position = (int(after_attempt), int(after_seq))
        lines = list(log_lines(execution=execution, attempt=attempt, after=position)[: size + 1])
        next_url = None
        if len(lines) > size:
            lines = lines[:size]
            last = lines[-1]
            next_url = replace_query_param(request.build_absolute_uri(), "after", f"{last.attempt}.{last.seq}")
        dropped = log_dropped(execution=execution)
        return Response(
            {
                "results": ExecutionLogLineSerializer(lines, many=True).data,
                "next": next_url,
                "dropped": [
                    {"attempt": n, "lines": count}
                    for n, count in sorted(dropped.items())
                    if attempt is None or n == attempt
                ],
            }
        )
