"""Backfills (docs/backfill.md): `POST /v1/jobs/{id}/backfill` (or its dry run),
`GET /v1/backfills/{id}`, `POST /v1/backfills/{id}/cancel`, `GET /v1/jobs/{id}/backfills`."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from executions.clock import db_now
from executions.models import Backfill, BackfillOrder, FireAction, Reprocess
from executions.states import BackfillState, ExecutionState
from jobs.models import Job
from jobs.selectors import job_get
from readmodels.backfills import backfill_counts, backfill_list
from scheduling import backfills
from tenants.selectors import scope_of
from web.api.job_fields import StoredChoiceField
from web.audit import AuditedApi, Target
from web.headers import location
from web.rest import Pagination


class NewBackfillSerializer(serializers.Serializer):
    # "from" is a keyword: declared through the class's namespace.
    locals()["from"] = serializers.DateTimeField(help_text="The range's start, included (ISO 8601 with an offset).")
    to = serializers.DateTimeField(
        help_text="The range's end, excluded; after `from`, not after now, and at most 10,000 fires from `from`."
    )
    order = serializers.ChoiceField(BackfillOrder.choices, default=BackfillOrder.OLDEST_FIRST)
    reprocess = serializers.ChoiceField(
        Reprocess.choices,
        default=Reprocess.NONE,
        help_text="A fire that has a run already: NONE skips it; FAILED runs it again if its last run ended DEAD, "
        "CANCELLED or DISCARDED; ALL runs it again.",
    )
    maxConcurrent = serializers.IntegerField(
        min_value=1, max_value=backfills.MAX_CONCURRENT, default=1, help_text="At most this many runs at once."
    )
    dryRun = serializers.BooleanField(default=False, help_text="Answer the plan (BackfillPlan) and write nothing.")

    def validate(self, attrs):
        if attrs["from"] >= attrs["to"]:
            raise serializers.ValidationError({"to": ["must be after from"]})
        return attrs


class PlannedFireSerializer(serializers.Serializer):
    scheduledFor = serializers.DateTimeField(source="scheduled_for")
    action = StoredChoiceField(FireAction.choices, help_text="RUN (no run yet), RERUN or SKIP (a run exists).")
    reason = serializers.CharField()


class BackfillPlanSerializer(serializers.Serializer):
    dryRun = serializers.BooleanField(help_text="Always true: nothing was written.")
    fires = PlannedFireSerializer(many=True, help_text="The range's fires, in the order they would run.")


class BackfillSerializer(serializers.Serializer):
    backfillId = serializers.CharField(source="id")
    jobId = serializers.CharField(source="job_id")
    state = StoredChoiceField(BackfillState.choices)
    locals()["from"] = serializers.DateTimeField(source="range_from")
    to = serializers.DateTimeField(source="range_to")
    order = StoredChoiceField(BackfillOrder.choices)
    reprocess = StoredChoiceField(Reprocess.choices)
    maxConcurrent = serializers.IntegerField(source="max_concurrent")
    createdAt = serializers.DateTimeField(source="created_at")
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    counts = serializers.SerializerMethodField()

    @extend_schema_field(
        {
            "type": "object",
            "description": "fires (to run or re-run), skipped, released (made into runs), waiting (not released "
            "yet) and its runs' executions by state.",
            "properties": {
                name: {"type": "integer", "minimum": 0}
                for name in ["fires", "skipped", "released", "waiting", *ExecutionState.values]
            },
            "required": ["fires", "skipped", "released", "waiting", *ExecutionState.values],
        }
    )
    def get_counts(self, backfill: Backfill) -> dict[str, int]:
        return backfill_counts(backfill)


def _job_or_404(request, job_id) -> Job:
    job = job_get(scope=scope_of(user=request.user), job_id=job_id)
    if job is None:
        raise Http404("no such job")
    return job


def _backfill_or_404(request, backfill_id) -> Backfill:
    try:
        backfill = backfill_list(scope=scope_of(user=request.user)).filter(pk=backfill_id).first()
    except (DjangoValidationError, ValueError):  # a malformed id is simply not found
        backfill = None
    if backfill is None:
        raise Http404("no such backfill")
    return backfill


def _refused(refusal: backfills.BackfillRefused) -> serializers.ValidationError:
    return serializers.ValidationError({refusal.field: [refusal.message]})


class JobBackfillApi(AuditedApi, APIView):
    audit_actions = {"POST": "backfill.create"}

    @extend_schema(
        summary="Backfill a job, or see what a backfill would run",
        request=NewBackfillSerializer,
        responses={201: BackfillSerializer, 200: BackfillPlanSerializer},
        description="Run the fires of a CRON or INTERVAL job's schedule in [from, to) (its timezone, DST and H as "
        "the dispatcher resolves them), each once: a fire that has a run already is skipped unless `reprocess` "
        "says otherwise. Its runs (origin BACKFILL) are admitted like any work, never more than `maxConcurrent` "
        "at once; they are not misfires. With `dryRun` the answer (200) is the plan and nothing is written; else "
        "the backfill (201). A job of another type answers 400 naming `type`; a cancelled or completed job 409.",
    )
    def post(self, request, job_id):
        given = NewBackfillSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        asked = given.validated_data
        job = _job_or_404(request, job_id)
        try:
            if asked["dryRun"]:
                self.not_audited()  # a plan changes nothing
                plan = backfills.backfill_plan(
                    job=job,
                    start=asked["from"],
                    end=asked["to"],
                    order=asked["order"],
                    reprocess=asked["reprocess"],
                    now=db_now(),
                )
                return Response(BackfillPlanSerializer({"dryRun": True, "fires": plan}).data)
            self.acting_on(Target.of_job(job))
            backfill = backfills.backfill_create(
                job=job,
                start=asked["from"],
                end=asked["to"],
                order=asked["order"],
                reprocess=asked["reprocess"],
                max_concurrent=asked["maxConcurrent"],
                now=db_now(),
            )
        except backfills.BackfillRefused as refusal:
            raise _refused(refusal) from None
        counts = backfill_counts(backfill)
        self.acting_on(
            Target.of_job(job), f"backfill {backfill.pk}: {counts['fires']} fires, {counts['skipped']} skipped"
        )
        return Response(
            BackfillSerializer(backfill).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": location(request, "backfill-detail", backfill_id=backfill.pk)},
        )


class BackfillDetailApi(APIView):
    @extend_schema(
        summary="Get a backfill",
        description="A backfill's parameters, state and progress (counts).",
        responses=BackfillSerializer,
    )
    def get(self, request, backfill_id):
        return Response(BackfillSerializer(_backfill_or_404(request, backfill_id)).data)


class BackfillCancelApi(AuditedApi, APIView):
    audit_actions = {"POST": "backfill.cancel"}
    audit_target_type, audit_id_kwarg = "backfill", "backfill_id"

    @extend_schema(
        summary="Cancel a backfill",
        request=None,
        responses=BackfillSerializer,
        description="Nothing more of it is released and its runs not started are cancelled; those running finish. "
        "A finished backfill answers as it is.",
    )
    def post(self, request, backfill_id):
        backfill = _backfill_or_404(request, backfill_id)
        self.acting_on(
            Target(type="backfill", id=str(backfill.pk), job_id=backfill.job_id, tenant_id=backfill.tenant_id)
        )
        backfill = backfills.backfill_cancel(
            backfill=backfill, now=db_now(), reason=f"backfill cancelled by {request.user}"
        )
        return Response(BackfillSerializer(backfill).data)


@extend_schema_view(get=extend_schema(summary="List a job's backfills"))
class JobBackfillsApi(generics.ListAPIView):
    """A job's backfills, newest first."""

    serializer_class = BackfillSerializer
    pagination_class = Pagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no job
            return Backfill.objects.none()
        job = _job_or_404(self.request, self.kwargs["job_id"])
        return backfill_list(scope=scope_of(user=self.request.user)).filter(job=job)
