"""The dead letter by error group: `GET /v1/dead-letter/groups` and
`POST /v1/dead-letter/groups/{fingerprint}/retry` · `/discard` (readmodels/dead_letter.py).

A group is the caller's DEAD executions whose errors share a fingerprint (the error with its
numbers, ids, quoted values and times masked). Retry re-drives each as its next attempt; discard
moves each to DISCARDED, out of the dead letter for good. A large group is worked through for a
bounded time per request, oldest first; the answer says how many remain, and the same request
again continues."""

import uuid

from django.db import transaction
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import AuditOutcome
from audit.services import REFUSALS, Actor, Target, audit_record, audit_records, entry
from executions.clock import db_now
from executions.models import Execution
from readmodels import dead_letter
from scheduling.execution_changes import execution_redrive, executions_discard
from tenants.selectors import scope_of
from web.audit import api_actor, request_uuid
from web.rest import GivenIfEmpty, refuse_unknown_parameters


class ErrorGroupSerializer(serializers.Serializer):
    fingerprint = serializers.CharField(
        source="key", help_text='The group\'s key in paths: 16 hex digits, or "-" for DEAD executions with no error.'
    )
    pattern = serializers.CharField(
        source="masked", help_text="The error with what varies masked: <n>, <id>, <str>, <hex>, <ip>, <time>."
    )
    exceptionType = serializers.CharField(source="exception_type", help_text='e.g. "KeyError"; "" when none.')
    count = serializers.IntegerField(help_text="DEAD executions in the group.")
    firstSeen = serializers.DateTimeField(source="first_seen", allow_null=True)
    lastSeen = serializers.DateTimeField(source="last_seen", allow_null=True)
    jobs = serializers.IntegerField(help_text="Jobs affected.")
    pools = serializers.IntegerField(source="pool_count", help_text="Pools affected.")
    sampleExecutionId = serializers.CharField(source="sample_id", allow_null=True, help_text="The newest one.")
    sampleError = serializers.CharField(source="sample_error", help_text="The newest one's error, in full.")


class DeadLetterSerializer(serializers.Serializer):
    results = ErrorGroupSerializer(many=True, source="groups", help_text="Newest failure first.")
    total = serializers.IntegerField(help_text="DEAD executions in all.")
    moreGroups = serializers.IntegerField(
        source="more_groups", help_text=f"Older groups beyond the {dead_letter.GROUP_LIMIT} listed."
    )


class GroupActionSerializer(serializers.Serializer):
    fingerprint = serializers.CharField()
    action = serializers.ChoiceField(choices=["retry", "discard"])
    done = serializers.IntegerField(help_text="Executions re-driven (retry) or discarded in this request.")
    refused = serializers.IntegerField(
        help_text="Executions the action was refused for (a quota, a state change): still DEAD, and not tried "
        "again in this pass."
    )
    remaining = serializers.IntegerField(
        help_text="Executions of this pass not tried yet and still DEAD: those in the group when the pass began, "
        "less those done or refused. Never one that the pass re-drove and that failed again, so a group that keeps "
        "failing still reaches 0. While it is above 0, post again with `cursor` to continue the pass."
    )
    cursor = serializers.CharField(
        allow_null=True,
        help_text="Continues this pass: post the same action again with `?cursor=` this value. Null when "
        "nothing of the pass remains.",
    )


class _Cursor(GivenIfEmpty, serializers.RegexField):
    """Present and empty (`?cursor=`) is a bad cursor, not a new pass."""


class GroupActionQuerySerializer(serializers.Serializer):
    cursor = _Cursor(
        dead_letter.CURSOR_PATTERN,
        required=False,
        error_messages={"invalid": "not a cursor of a group action's answer"},
        help_text="The `cursor` of the previous answer: continue that pass (the executions that were in the group "
        "when it began, not yet tried). Without it, a new pass over the executions in the group now.",
    )

    def validate_cursor(self, raw: str) -> dead_letter.Pass:
        try:
            return dead_letter.Pass.of_token(raw)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from exc


class DeadLetterGroupsApi(APIView):
    @extend_schema(
        summary="List dead-letter groups",
        description="The caller's DEAD executions grouped by error fingerprint (the error with its numbers, ids, "
        f"quoted values and times masked), newest failure first: the {dead_letter.GROUP_LIMIT} newest groups, "
        "each with a count, its jobs and pools, and its newest execution as a sample.",
        responses=DeadLetterSerializer,
    )
    def get(self, request):
        refuse_unknown_parameters(request, ())  # one page: the newest groups
        found = dead_letter.dead_letter_groups(scope=scope_of(user=request.user))
        return Response(DeadLetterSerializer(found).data)


def _redrive(batch: list[Execution], actor: Actor, request_id: uuid.UUID) -> tuple[int, int]:
    """Each in its own transaction with its audit row, as the dashboard's bulk retry does."""
    moved = refused = 0
    for execution in batch:
        now = db_now()
        target = Target.of_execution(execution)
        try:
            with transaction.atomic():
                done = execution_redrive(
                    execution=execution, now=now, reason=f"re-driven with its error group by {actor.username}"
                )
                audit_record(
                    actor=actor,
                    action="execution.retry",
                    target=target,
                    outcome=AuditOutcome.OK,
                    now=now,
                    detail=f"attempt {done.attempt} pending (error group)",
                    request_id=request_id,
                )
            moved += 1
        except REFUSALS as exc:
            audit_record(
                actor=actor,
                action="execution.retry",
                target=target,
                outcome=AuditOutcome.REFUSED,
                now=now,
                detail=str(exc),
                request_id=request_id,
            )
            refused += 1
    return moved, refused


def _discard(batch: list[Execution], actor: Actor, request_id: uuid.UUID) -> tuple[int, int]:
    """The batch in one statement, with an audit row per execution, in one transaction."""
    now = db_now()
    with transaction.atomic():
        moved = executions_discard(
            executions=batch, now=now, reason=f"discarded with its error group by {actor.username}"
        )
        audit_records(
            entry(
                actor=actor,
                action="execution.discard",
                target=Target.of_execution(execution),
                outcome=AuditOutcome.OK if execution.pk in moved else AuditOutcome.REFUSED,
                now=now,
                detail=f"error group {execution.error_fingerprint or '(none)'}"
                if execution.pk in moved
                else "no longer DEAD",
                request_id=request_id,
            )
            for execution in batch
        )
    return len(moved), len(batch) - len(moved)


_ACTIONS = {"retry": _redrive, "discard": _discard}


class DeadLetterGroupActionApi(APIView):
    action_name = ""

    @extend_schema(
        request=None,
        responses=GroupActionSerializer,
        parameters=[
            GroupActionQuerySerializer,
            OpenApiParameter(
                "fingerprint",
                {"type": "string", "pattern": "^([0-9a-f]{16}|-)$"},
                OpenApiParameter.PATH,
                description='A group\'s fingerprint from GET /v1/dead-letter/groups ("-": DEAD executions with no '
                "error). A group with no DEAD execution of the caller's answers 404, unless `cursor` continues a "
                "pass: then the pass is done (remaining 0).",
            ),
        ],
    )
    def post(self, request, fingerprint):
        scope = scope_of(user=request.user)
        key = dead_letter.fingerprint_in_path(fingerprint)
        query = GroupActionQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        resume = query.validated_data.get("cursor")
        # A new pass needs a group; a pass continued may find the rest of it gone, which is its end.
        if key is None or (resume is None and not dead_letter.group_executions(scope=scope, fingerprint=key).exists()):
            raise Http404("no such error group")
        act, actor, request_id = _ACTIONS[self.action_name], api_actor(request), request_uuid(request)
        # Audited per execution, one request id for the request (as the dashboard's group actions).
        outcome = dead_letter.group_act(
            scope=scope, fingerprint=key, resume=resume, act=lambda batch: act(batch, actor, request_id)
        )
        body = {
            "fingerprint": fingerprint,
            "action": self.action_name,
            "done": outcome.done,
            "refused": outcome.refused,
            "remaining": outcome.remaining,
            "cursor": outcome.next.token() if outcome.next else None,
        }
        return Response(GroupActionSerializer(body).data)


# How a group action goes, said by both (each after what it does to an execution).
_PASS = (
    "One pass over the executions in the group when the pass began, oldest failure first, each tried at most "
    "once, for a bounded time per request. Loop: post, then post again with `?cursor=` the answer's `cursor` "
    "while `remaining` is above 0. A bad `cursor` answers 400."
)


@extend_schema_view(
    post=extend_schema(
        summary="Retry a dead-letter group",
        description="Re-drive each of the group's DEAD executions as its next attempt, each in its own "
        "transaction with its audit row (one refused, by a quota or a change of state, is counted in `refused`). "
        f"{_PASS}",
    )
)
class DeadLetterGroupRetryApi(DeadLetterGroupActionApi):
    action_name = "retry"


@extend_schema_view(
    post=extend_schema(
        summary="Discard a dead-letter group",
        description="Move the group's DEAD executions to DISCARDED, out of the dead letter for good (a batch in one "
        f"statement, with an audit row per execution). {_PASS}",
    )
)
class DeadLetterGroupDiscardApi(DeadLetterGroupActionApi):
    action_name = "discard"
