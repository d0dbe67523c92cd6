import functools
from collections.abc import Callable
from typing import Any

from django.http import Http404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
)
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from executions.clock import db_now
from executions.models import Execution
from jobs import cron
from jobs.models import Job
from jobs.selectors import job_get, job_list
from jobs.versions import version_number
from readmodels.last_runs import attach_last_runs
from readmodels.selectors import execution_list, job_resume_preview
from scheduling.job_changes import job_cancel, job_pause, job_resume, job_trigger, job_update
from scheduling.job_creation import (
    MAX_BULK_JOBS,
    InvalidItems,
    bulk_item_key,
    job_create,
    jobs_create_bulk,
    request_fingerprint,
)
from tenants.models import Tenant
from tenants.selectors import scope_of
from web.api import examples
from web.api.execution_serializers import ExecutionSerializer
from web.api.job_filters import JobFilter
from web.api.job_serializers import (
    JobBulkInputSerializer,
    JobBulkOutputSerializer,
    JobDetailOutputSerializer,
    JobInputSerializer,
    JobOutputSerializer,
    JobUpdateSerializer,
    bulk_items,
    validated_job,
)
from web.api.resume_serializers import ResumePreviewSerializer, ResumeQuerySerializer
from web.audit import AuditedApi, Target
from web.authentication import actor_of, tenant_to_write_in
from web.collector import collector_held
from web.errors import error_body, field_errors_body
from web.headers import etag, if_match, location, rate_limit_headers
from web.json_input import field_errors
from web.json_output import FastJSONRenderer
from web.rest import BulkJSONParser, ExecutionPagination, representer
from web.schema import ERROR_REF

# What the request schema cannot say (OpenAPI 3.0 has no rules between fields); a body that breaks
# one is a 400 naming the field.
JOB_RULES = """Rules between fields, checked with the schema's:

- `type` decides the timing field: `runAt` (ONCE, with an offset), `delaySec` (DELAYED),
  `schedule` (CRON), `everySec` (INTERVAL) or `on` (EVENT); the others are not allowed,
  `timezone` is for CRON jobs only, and `startAt` for CRON and INTERVAL jobs.
- `payload` must fit the handler's declared shape (`sleep`: `seconds`; `fail`: `failTimes`,
  `message`; `http`: `url` required, `method`, `headers`, `body`, `timeoutSec`; `celery`:
  `bridge` and `task` required, `args`, `kwargs`, `queue`, `wait`, `waitTimeoutSec`; `noop`: any object).
- `retryPolicy.maxDelayMs` must be at least `initialDelayMs`.
- A token creates only in its own tenant; an update cannot change `type` or `tenant`, and is
  checked against the stored job (a CRON job's new `timezone` against its schedule, and so on).
"""


@functools.cache
def _job_representer() -> Callable[[Job], dict[str, Any]]:
    return representer(JobOutputSerializer())


def represent_job(job: Job) -> dict[str, Any]:
    """A job as JobOutputSerializer renders it, with its plan made once per process (a create's
    answer: DRF's own path copied and bound the serializer's fields for every request)."""
    return _job_representer()(job)


def _tagged(response: Response, job: Job) -> Response:
    """The answer with the job's ETag: the version its definition is at (web/headers.py)."""
    response["ETag"] = etag(version_number(job=job))
    return response


def _job_or_404(request, job_id) -> Job:
    job = job_get(scope=scope_of(user=request.user), job_id=job_id)
    if job is None:
        raise Http404("no such job")
    return job


@extend_schema_view(
    get=extend_schema(
        summary="List jobs",
        description="The caller's jobs, newest first, filtered by `state`, `type`, `pool`, `handler`, `name` "
        "(a substring) and `failing` (whose last run FAILED).",
    )
)
class JobListCreateApi(AuditedApi, generics.ListAPIView):
    audit_actions = {"POST": "job.create"}
    serializer_class = JobOutputSerializer
    filterset_class = JobFilter

    def get_queryset(self):
        return job_list(scope=scope_of(user=self.request.user))

    def paginate_queryset(self, queryset):
        # Each job's last run for the whole page at once, not a query per job.
        page = super().paginate_queryset(queryset)
        return attach_last_runs(list(page)) if page is not None else None

    @extend_schema(
        request=JobInputSerializer,
        responses={201: JobOutputSerializer, 200: JobOutputSerializer},
        examples=examples.JOB_CREATE,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                {"type": "string", "maxLength": 255},
                OpenApiParameter.HEADER,
                description="The same key and body again answer the first job (200); another body, 409.",
            )
        ],
        summary="Create a job",
        description="Create a job and its first execution in one transaction: 201 once both are stored. "
        f"Its handler and pool are among those GET /v1/handlers and GET /v1/pools list.\n\n{JOB_RULES}",
    )
    def post(self, request):
        key = request.headers.get("Idempotency-Key") or None
        if key is not None and len(key) > 255:
            raise serializers.ValidationError({"Idempotency-Key": ["must be at most 255 characters"]})
        data = validated_job(request.data)
        tenant = tenant_to_write_in(request, data.get("tenant"), what="jobs")
        try:
            result = job_create(
                tenant=tenant,
                fields=JobInputSerializer.model_fields_of(data),
                now=db_now(),
                idempotency_key=key,
                fingerprint=request_fingerprint(request.data) if key else "",  # it tells a key's replay
                actor=actor_of(request),
            )
        except cron.CronError as exc:  # an H schedule that, resolved with the new job's id, never fires
            raise serializers.ValidationError({"schedule": [str(exc)]}) from exc
        job = result.job
        self.acting_on(
            Target.of_job(job),
            f"{job.type} {job.handler} in {job.pool}" if result.created else "the same key and body: the first job",
        )
        (job,) = attach_last_runs([job], new=result.created)
        if not result.created:
            return Response(represent_job(job), status=status.HTTP_200_OK)
        headers = {"Location": location(request, "job-detail", job_id=job.pk), **rate_limit_headers(result.rate)}
        return Response(represent_job(job), status=status.HTTP_201_CREATED, headers=headers)


# The longest key a batch may use: its jobs store `<key>#<index>` in the 255-character column.
MAX_BULK_KEY_LENGTH = 255 - len(bulk_item_key("", MAX_BULK_JOBS - 1))


class JobBulkCreateApi(AuditedApi, APIView):
    """Create up to MAX_BULK_JOBS jobs in one request, all or nothing: one audit row for the batch."""

    audit_actions = {"POST": "job.bulk_create"}

    parser_classes = [BulkJSONParser]
    renderer_classes = [FastJSONRenderer]  # the same bytes as DRF's, in a third of the time

    def dispatch(self, request, *args, **kwargs):
        # From the body's parse to the answer, the batch's objects are alive: see web/collector.py.
        with collector_held():
            return super().dispatch(request, *args, **kwargs)

    @extend_schema(
        request=JobBulkInputSerializer,
        responses={
            201: JobBulkOutputSerializer,
            200: JobBulkOutputSerializer,
            400: OpenApiResponse(
                ERROR_REF,
                description="Invalid jobs, each by its index in `errors`; nothing created. An error about the "
                "request as a whole (`jobs` missing, empty or too long, the Idempotency-Key) names that field.",
            ),
        },
        examples=examples.JOB_BULK,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                {"type": "string", "maxLength": MAX_BULK_KEY_LENGTH},
                OpenApiParameter.HEADER,
                description="For the whole batch: the same key and body again answer the first batch's jobs "
                "(200); another body, 409. The batch's jobs hold the keys `<key>#0`, `<key>#1`, …",
            )
        ],
        summary="Create up to 1,000 jobs at once",
        description=f"Each item is a body as POST /v1/jobs takes it, all in one tenant. Every bad item is "
        f"reported by its index and nothing is created; quotas count every job of the batch.\n\n{JOB_RULES}",
    )
    def post(self, request):
        key = request.headers.get("Idempotency-Key") or None
        if key is not None and len(key) > MAX_BULK_KEY_LENGTH:
            raise serializers.ValidationError(
                {"Idempotency-Key": [f"must be at most {MAX_BULK_KEY_LENGTH} characters for a bulk request"]}
            )
        items = bulk_items(request.data)
        tenant, fields, errors = _validate_bulk(request, items)
        if errors:
            return _invalid_items(errors, len(items))
        assert tenant is not None  # at least one item, and each one valid
        try:
            result = jobs_create_bulk(
                tenant=tenant,
                items=fields,
                now=db_now(),
                idempotency_key=key,
                fingerprint=request_fingerprint(request.data) if key else "",  # it tells a key's replay
                actor=actor_of(request),
            )
        except InvalidItems as exc:
            return _invalid_items([{"index": i, field: [message]} for i, field, message in exc.errors], len(items))
        self.acting_on(
            Target(type="job", label=f"{len(result.jobs)} jobs", tenant_id=tenant.pk),
            _batch_detail(result.jobs, created=result.created),
        )
        body = {"jobs": [represent_job(job) for job in attach_last_runs(list(result.jobs), new=result.created)]}
        if not result.created:
            return Response(body, status=status.HTTP_200_OK)
        # A batch is no one resource: its Location is the list its jobs joined, newest first.
        headers = {"Location": location(request, "job-list"), **rate_limit_headers(result.rate)}
        return Response(body, status=status.HTTP_201_CREATED, headers=headers)


def _invalid_items(errors: list[dict[str, Any]], total: int) -> Response:
    """A batch's 400: each invalid item by its index, in the API's error shape (web/errors.py). A
    Response, not a ValidationError: that would make each `index` a string."""
    first = errors[0]
    said = field_errors_body({name: value for name, value in first.items() if name != "index"})["detail"]
    detail = f"{len(errors)} of the {total} jobs are invalid and none was created; job {first['index']}: {said}"
    return Response(error_body(400, detail, errors=errors), status=status.HTTP_400_BAD_REQUEST)


def _batch_detail(jobs: list[Job], *, created: bool) -> str:
    """A batch's audit detail: its jobs by id, as many as fit in the row."""
    said = "created" if created else "the same key and body: the first batch's"
    return f"{said} {len(jobs)} jobs: " + ", ".join(f"{job.pk} {job.name}" for job in jobs[:40])


def _validate_bulk(request, items: list) -> tuple[Tenant | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """Each item checked as POST /v1/jobs checks a body: the batch's tenant, the items' model
    fields, and an entry per bad item (its index and its fields' errors)."""
    tenants: dict[str | None, Tenant | serializers.ValidationError] = {}
    batch_tenant: Tenant | None = None
    fields: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    memo: dict = {}  # the values the batch's fields found valid: see StrictSerializer.batch_memo
    # Its text shows nothing unstorable (BulkJSONParser): no item's values need the walk.
    storable = getattr(request, "body_storable", False) is True
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append({"index": index, "non_field_errors": ["must be a JSON object: a job body"]})
            continue
        item_errors: Any = {} if storable else field_errors(item)
        if not item_errors:
            try:
                data = validated_job(item, memo)
            except serializers.ValidationError as exc:
                item_errors = exc.detail
        if not item_errors:
            slug = data.get("tenant")
            if slug not in tenants:
                try:
                    tenants[slug] = tenant_to_write_in(request, slug, what="jobs")
                except serializers.ValidationError as exc:
                    tenants[slug] = exc
            found = tenants[slug]
            if isinstance(found, serializers.ValidationError):
                item_errors = found.detail
            elif batch_tenant is not None and found != batch_tenant:
                item_errors = {"tenant": [f"a batch creates in one tenant; its first job's is '{batch_tenant.slug}'"]}
            else:
                batch_tenant = found
                fields.append(JobInputSerializer.model_fields_of(data))
        if item_errors:
            item_errors = dict(item_errors)
            if "index" in item_errors:  # a field named like the entry's own key: said apart
                said = item_errors.pop("index")
                item_errors.setdefault("non_field_errors", []).extend(f"index: {message}" for message in said)
            errors.append({"index": index, **item_errors})
    return batch_tenant, fields, errors


class JobDetailApi(AuditedApi, APIView):
    audit_actions = {"PUT": "job.update", "PATCH": "job.update", "DELETE": "job.cancel"}

    @extend_schema(
        summary="Get a job",
        description="The job with its newest executions (`latestExecutions`) and its ETag: the version its "
        "definition is at, to send back as If-Match with a change.",
        responses=JobDetailOutputSerializer,
    )
    def get(self, request, job_id):
        job = _job_or_404(request, job_id)
        return _tagged(Response(JobDetailOutputSerializer(job).data), job)

    # PUT behaves as PATCH (see _update), so its schema marks every field optional too.
    @extend_schema(
        summary="Change a job (PUT)",
        request=JobUpdateSerializer(partial=True),
        responses=JobOutputSerializer,
        description="Change the fields given, as PATCH does: a field left out keeps its value (a job's type and "
        "tenant never change, so no body could replace it whole). A change of timing re-times the pending fire; "
        f"the job's next version records what changed.\n\n{JOB_RULES}",
        examples=examples.JOB_UPDATE,
    )
    def put(self, request, job_id):
        return self._update(request, job_id)

    @extend_schema(
        summary="Change some of a job's fields",
        request=JobUpdateSerializer,
        responses=JobOutputSerializer,
        description="Change the fields given; the others keep their values. A change of timing re-times the "
        f"pending fire; the job's next version records what changed.\n\n{JOB_RULES}",
        examples=examples.JOB_UPDATE,
    )
    def patch(self, request, job_id):
        return self._update(request, job_id)

    def _update(self, request, job_id):
        job = _job_or_404(request, job_id)
        self.acting_on(Target.of_job(job))
        # PUT replaces what it names; like PATCH it leaves unnamed fields as they are, since a
        # job's identity (type, tenant) cannot change anyway.
        serializer = JobUpdateSerializer(job, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        fields = serializer.to_model_fields()
        fields.pop("type", None)
        job = job_update(
            job=job, fields=fields, now=db_now(), actor=actor_of(request), if_version=if_match(request.headers)
        )
        self.acting_on(Target.of_job(job), "changed " + ", ".join(sorted(fields)))
        return _tagged(Response(JobOutputSerializer(job).data), job)

    @extend_schema(
        summary="Cancel a job",
        # It cancels, as the contract says, and keeps the job: not drf-spectacular's `jobs_destroy`.
        operation_id="jobs_cancel",
        description="No future fires: the job becomes CANCELLED, and so does each of its executions not yet "
        "started. Runs already started finish (cancel their executions to stop them). The job and its history "
        "are kept; a cancelled job answers 409.",
        responses={200: JobOutputSerializer},
    )
    def delete(self, request, job_id):
        job = _job_or_404(request, job_id)
        self.acting_on(Target.of_job(job))
        job = job_cancel(job=job, now=db_now(), if_version=if_match(request.headers))
        return Response(JobOutputSerializer(job).data)


class JobPauseApi(AuditedApi, APIView):
    audit_actions = {"POST": "job.pause"}

    @extend_schema(
        summary="Pause a job",
        description="Nothing of a PAUSED job is admitted: its pending execution waits (pendingReason JOB_PAUSED) "
        "until it is resumed; what is QUEUED or RUNNING finishes. A job that is not ACTIVE answers 409.",
        request=None,
        responses=JobOutputSerializer,
    )
    def post(self, request, job_id):
        job = _job_or_404(request, job_id)
        self.acting_on(Target.of_job(job))
        job = job_pause(job=job, now=db_now(), if_version=if_match(request.headers))
        return _tagged(Response(JobOutputSerializer(job).data), job)


class JobResumeApi(AuditedApi, APIView):
    audit_actions = {"POST": "job.resume"}

    @extend_schema(
        summary="Resume a job, or see what resuming would run",
        request=None,
        parameters=[ResumeQuerySerializer],
        responses=PolymorphicProxySerializer(
            component_name="ResumeResult",
            serializers=[JobOutputSerializer, ResumePreviewSerializer],
            resource_type_field_name=None,
        ),
        description="Resume a paused job: the job, ACTIVE. With `dryRun=true` nothing changes and the answer is "
        "what resume would run and skip under the job's misfirePolicy (ResumePreview).",
    )
    def post(self, request, job_id):
        query = ResumeQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        if query.validated_data["dryRun"]:
            if_match(request.headers)  # a malformed If-Match is a 400 for a preview too, as documented
            self.not_audited()  # a preview changes nothing
            preview = job_resume_preview(job=_job_or_404(request, job_id), now=db_now())
            return Response(ResumePreviewSerializer(preview).data)
        job = _job_or_404(request, job_id)
        self.acting_on(Target.of_job(job))
        job = job_resume(job=job, now=db_now(), if_version=if_match(request.headers))
        return _tagged(Response(JobOutputSerializer(job).data), job)


class JobTriggerApi(AuditedApi, APIView):
    audit_actions = {"POST": "job.trigger"}

    @extend_schema(
        summary="Run a job now",
        description="A new execution of the job, due now, outside its schedule (origin TRIGGER); its schedule is "
        "unchanged. A COMPLETED one-off job becomes ACTIVE again to run it; a paused or cancelled job answers 409.",
        request=None,
        responses=ExecutionSerializer,
    )
    def post(self, request, job_id):
        job = _job_or_404(request, job_id)
        self.acting_on(Target.of_job(job))
        execution = job_trigger(job=job, now=db_now())
        self.acting_on(Target.of_job(job), f"execution {execution.pk}")
        return Response(ExecutionSerializer(execution).data)


@extend_schema_view(
    get=extend_schema(
        summary="List a job's executions",
        description="The job's executions (each attempt of each run), newest scheduled first.",
    )
)
class JobExecutionsApi(generics.ListAPIView):
    serializer_class = ExecutionSerializer
    pagination_class = ExecutionPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no job
            return Execution.objects.none()
        job = _job_or_404(self.request, self.kwargs["job_id"])
        return execution_list(scope=scope_of(user=self.request.user)).filter(job=job)
