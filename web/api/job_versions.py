"""Versions of a job's definition: `GET /v1/jobs/{id}/versions` (its history, newest first, with
what each change changed and who made it) and `POST /v1/jobs/{id}/versions/{n}/restore` (make
version n's definition current again, as a new version). The versions are written by
scheduling's job_create and job_update (jobs.versions); a restore is an update."""

from collections.abc import Callable, Sequence
from typing import Any

from django.db import transaction
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from executions.clock import db_now
from jobs.fields import FIELDS, GROUPS, JobField
from jobs.models import Job, JobVersion, Priority
from jobs.selectors import job_get, job_locked
from jobs.versions import version_get, version_latest, version_one, versions_stored
from scheduling.job_changes import job_update
from tenants.selectors import scope_of
from web.api.job_api_names import API_NAME, api_change, api_definition
from web.api.job_fields import PayloadField, StoredChoiceField
from web.api.job_serializers import JobOutputSerializer, JobUpdateSerializer
from web.api.workflow_serializers import EventFilterField, WorkflowField
from web.audit import AuditedApi, Target
from web.authentication import actor_of
from web.rest import Pagination, refuse_unknown_parameters


@transaction.atomic
def job_version_restore(*, job: Job, version: JobVersion, actor: str, now) -> Job:
    """Make `version`'s definition the job's again, through job_update: validated as a PUT of
    that definition would be (a handler or pool that is gone is a 400 naming the field), refused
    on a finished job as a PUT is, re-timing the pending fire when the timing changes, and
    recorded as the job's next version. A restore of the definition already current changes
    nothing and records no version.

    Only the fields that differ from the job's are applied (a DELAYED job whose delay is
    unchanged keeps its time), compared with the job's row locked for the rest of the
    transaction, so a concurrent update cannot slip in between the comparison and the write.
    """
    job = job_locked(job_id=job.pk)
    data = {name: value for name, value in api_definition(version.definition).items() if name != "type"}
    # A definition leaves out a field that was unset where it is optional (jobs/fields.py,
    # `when_set`): unset it again.
    for field in FIELDS:
        if job.type not in field.optional_for:
            continue
        if not field.group:
            data.setdefault(API_NAME[field.name], None)
        elif isinstance(data.get(API_NAME[field.group]), dict):  # a target's, where it has one
            data[API_NAME[field.group]].setdefault(API_NAME[field.name], None)
    serializer = JobUpdateSerializer(job, data=data, partial=True)
    serializer.is_valid(raise_exception=True)
    fields = serializer.to_model_fields()
    fields.pop("type", None)
    changed = {name: value for name, value in fields.items() if getattr(job, name) != value}
    return job_update(job=job, fields=changed, now=now, actor=actor)


# --- Output ----------------------------------------------------------------------------------------


@extend_schema_field(EventFilterField(allow_null=True))
class _DefinitionFilter(EventFilterField):
    """A definition's `filter`: null as an EVENT job without one stores it, and left out of other
    jobs' definitions. Not allow_null, with which DRF would answer null for those instead."""


# A field of a definition by its kind (jobs/fields.py); a document by its own field.
_BY_KIND: dict[str, Callable[..., serializers.Field]] = {
    "text": serializers.CharField,
    "integer": serializers.IntegerField,
    "instant": serializers.DateTimeField,
    "boolean": serializers.BooleanField,
    "priority": lambda **kwargs: StoredChoiceField(Priority.names, **kwargs),
    "choice": lambda *, name, **kwargs: StoredChoiceField(
        # The model field's choices (a ForeignObjectRel has none: no job field of kind "choice" is one).
        [value for value, _ in getattr(Job._meta.get_field(name), "choices", None) or ()],
        **kwargs,
    ),
}
_DOCUMENTS: dict[str, Callable[..., serializers.Field]] = {
    "payload": PayloadField,
    "workflow": WorkflowField,
    "event_filter": _DefinitionFilter,
}


def _definition_fields(fields: Sequence[JobField]) -> dict[str, serializers.Field]:
    """The serializer fields of a definition's `fields` (jobs/fields.py), by their API names: a
    field every job's definition holds is required, the others are there for the jobs that hold
    them."""
    made: dict[str, serializers.Field] = {}
    for field in fields:
        # A group's object is there whole or not at all (VersionDefinitionSerializer says which),
        # but for a field it holds only when set (a target's rateLimit).
        required = field.held is None or (bool(field.group) and not field.optional_for)
        if field.name in _DOCUMENTS:
            made[API_NAME[field.name]] = _DOCUMENTS[field.name](required=required)
        elif field.kind == "choice":
            made[API_NAME[field.name]] = _BY_KIND["choice"](name=field.name, required=required)
        else:
            made[API_NAME[field.name]] = _BY_KIND[field.kind](required=required)
    return made


class VersionTargetSerializer(serializers.Serializer):
    def get_fields(self):
        return _definition_fields(GROUPS["target"])


class VersionRetryPolicySerializer(serializers.Serializer):
    def get_fields(self):
        return _definition_fields(GROUPS["retry_policy"])


_GROUP_SERIALIZERS = {"target": VersionTargetSerializer, "retry_policy": VersionRetryPolicySerializer}


class VersionDefinitionSerializer(serializers.Serializer):
    """A job's definition as a version keeps it: the fields a PUT may change, with the API's
    names, plus `type`. The timing fields are those of the type: `runAt` (ONCE), `delaySec`
    (DELAYED), `schedule` and `timezone` (CRON, with `startAt` when it has one), `everySec` and
    `startAt` (INTERVAL), `on` and `filter` (EVENT). A workflow job has
    `workflow` instead of `target` and `payload`."""

    def get_fields(self):
        # The table's fields (jobs/fields.py) in its order, a group as an object of its own.
        made: dict[str, serializers.Field] = {}
        for field in FIELDS:
            if not field.group:
                made.update(_definition_fields([field]))
            elif API_NAME[field.group] not in made:
                required = all(member.held is None for member in GROUPS[field.group])
                made[API_NAME[field.group]] = _GROUP_SERIALIZERS[field.group](required=required)
        return made

    def to_representation(self, instance):
        # A version keeps its definition in the model's names (jobs.versions).
        return super().to_representation(api_definition(instance))


@extend_schema_field(OpenApiTypes.ANY)
class AnyValueField(serializers.JSONField):
    """A field's value as the definition holds it: a string, number, boolean, object or null."""


class VersionChangeSerializer(serializers.Serializer):
    """One changed field: `field` is its name in the definition, a nested one dotted
    (`retryPolicy.maxAttempts`); `from` is null for a field the version before did not have."""

    field = serializers.CharField()
    # `from` is a Python keyword: declared as `from_` and renamed in get_fields.
    from_ = AnyValueField(allow_null=True)
    to = AnyValueField(allow_null=True)

    def get_fields(self):
        return {("from" if name == "from_" else name): field for name, field in super().get_fields().items()}

    def to_representation(self, instance):
        # A version names a changed field in the model's terms (jobs.versions).
        return super().to_representation(api_change(instance))


class JobVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField(source="number")
    createdAt = serializers.DateTimeField(source="created_at")
    actor = serializers.CharField(help_text="Who made the change: a token (name, prefix, tenant) or a user.")
    changes = VersionChangeSerializer(many=True, help_text="Against the version before; empty for version 1.")
    definition = VersionDefinitionSerializer()


class JobVersionRestoreSerializer(serializers.Serializer):
    job = JobOutputSerializer(help_text="The job after the restore.")
    version = JobVersionSerializer(
        help_text="The job's version now current: the one the restore made, or the latest one when the "
        "restored definition was already current (nothing changed)."
    )


# --- Views ------------------------------------------------------------------------------------------


def _job_or_404(request, job_id) -> Job:
    job = job_get(scope=scope_of(user=request.user), job_id=job_id)
    if job is None:
        raise Http404("no such job")
    return job


class VersionPagination(Pagination):
    """A job's versions, newest first."""

    ordering = "-number"


VERSION_NUMBER = OpenApiParameter(
    "number", {"type": "integer", "minimum": 1}, OpenApiParameter.PATH, description="The version's number."
)


@extend_schema_view(get=extend_schema(summary="List a job's versions"))
class JobVersionListApi(generics.ListAPIView):
    """A job's versions, newest first: each with its definition, what it changed against the
    version before, who made the change and when."""

    serializer_class = JobVersionSerializer
    pagination_class = VersionPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no job
            return JobVersion.objects.none()
        return self.stored

    def list(self, request, *args, **kwargs):
        job = _job_or_404(request, self.kwargs["job_id"])
        stored = versions_stored(job=job)
        if stored is not None:
            self.stored = stored
            return super().list(request, *args, **kwargs)
        # A job whose definition never changed: its one version is its row (jobs.versions), a
        # page of one. Its parameters are checked as any page's are.
        paginator = self.paginator
        assert isinstance(paginator, VersionPagination)
        refuse_unknown_parameters(request, paginator.parameters(self))
        paginator.get_page_size(request)
        paginator.decode_cursor(request)
        return Response({"next": None, "previous": None, "results": [self.get_serializer(version_one(job)).data]})


class JobVersionRestoreApi(AuditedApi, APIView):
    audit_actions = {"POST": "job.restore"}

    @extend_schema(
        summary="Restore a job's version",
        request=None,
        responses=JobVersionRestoreSerializer,
        parameters=[VERSION_NUMBER],
        description=(
            "Make version `number`'s definition current again, as a PUT of it would: validated as "
            "one (a handler or pool no longer known is a 400), refused on a finished job (409), "
            "re-timing the pending fire when the timing changes. The restore is itself the job's "
            "next version, unless that definition is already current."
        ),
    )
    def post(self, request, job_id, number: str):
        job = _job_or_404(request, job_id)
        self.acting_on(Target.of_job(job))
        # Matched as text, not with Django's int converter: a path that is not a number is then
        # this API's JSON 404, not the HTML page of a URL that matched no route.
        version = version_get(job=job, number=int(number)) if number.isascii() and number.isdigit() else None
        if version is None:
            raise Http404("no such version")
        job = job_version_restore(job=job, version=version, actor=actor_of(request), now=db_now())
        self.acting_on(Target.of_job(job), f"restored version {version.number}")
        body: dict[str, Any] = {
            "job": JobOutputSerializer(job).data,
            "version": JobVersionSerializer(version_latest(job=job)).data,
        }
        return Response(body)
