"""Alert rules (`GET/POST /v1/alerts/rules`, `GET/PATCH/DELETE /v1/alerts/rules/{id}`) and the
alerts they raised (`GET /v1/alerts`, `GET /v1/alerts/{id}`). The alerter (maintenance/registry.py)
evaluates the rules; docs/alerts.md says what each kind means."""

from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts.kinds import DEFAULT_WINDOW_SECONDS, rule_problems
from alerts.models import Alert, AlertKind, AlertRule
from alerts.selectors import alert_get, alert_list, rule_get, rule_list
from alerts.services import rule_create, rule_delete, rule_update
from jobs import registry
from jobs.selectors import job_get
from tenants.models import Tenant
from tenants.selectors import scope_of
from web.api import examples
from web.api.alert_filters import AlertFilter
from web.api.alert_serializers import (
    AlertRuleInputSerializer,
    AlertRuleSerializer,
    AlertRuleUpdateSerializer,
    AlertSerializer,
)
from web.audit import AuditedApi, Target
from web.authentication import actor_of, tenant_to_write_in
from web.headers import location
from web.rest import Pagination

RULE_RULES = """Rules between fields, checked with the schema's:

- `threshold` is in the kind's unit and range: FAILURE_RATE a percentage from 0 to 100 (required),
  START_LAG_P99 milliseconds (required), DEAD_LETTER a count (default 0), SCHEDULER_DOWN and
  MISSED_FIRE seconds (default 60); NO_WORKERS and JOB_AUTO_PAUSED have none (any given is ignored).
- `pool` narrows every kind but SCHEDULER_DOWN and JOB_AUTO_PAUSED; `jobId` narrows FAILURE_RATE,
  START_LAG_P99, DEAD_LETTER, MISSED_FIRE and JOB_AUTO_PAUSED (a cron or interval job), and must be
  a job of the rule's tenant.
- A token's rule is its tenant's and judges only its tenant's executions and jobs (NO_WORKERS and
  SCHEDULER_DOWN watch the shared fleet). A staff session may name a `tenant`, or leave it out for
  a global rule over every tenant.
"""


class AlertPagination(Pagination):
    """Alerts, newest fired first."""

    ordering = "-fired_at"


def _rule_or_404(request, rule_id) -> AlertRule:
    rule = rule_get(scope=scope_of(user=request.user), rule_id=rule_id)
    if rule is None:
        raise Http404("no such alert rule")
    return rule


def _tenant_of_new_rule(request, slug: str | None) -> Tenant | None:
    """A token's tenant; a staff session's named tenant, or none (a global rule); a member's as
    for jobs."""
    staff_session = getattr(request.user, "tenant", None) is None and getattr(request.user, "is_staff", False)
    if staff_session and not slug:
        return None
    return tenant_to_write_in(request, slug, what="alert rules")


def _model_fields(data: dict[str, Any], *, tenant: Tenant | None, current: AlertRule | None) -> dict[str, Any]:
    """The rule's model fields from validated input (merged over `current` for a change),
    checked as a whole: 400 naming each wrong field."""

    def given(name: str, attr: str, default: Any) -> Any:
        if name in data:
            return data[name]
        return getattr(current, attr) if current is not None else default

    kind = given("kind", "kind", None)
    window_sec = given("windowSec", "window_sec", DEFAULT_WINDOW_SECONDS)
    pool = given("pool", "pool", "") or ""
    job_id = given("jobId", "job_id", None)
    threshold_given = "threshold" in data and data["threshold"] is not None
    threshold = data.get("threshold") if threshold_given else (current.threshold if current is not None else None)
    if current is not None and "kind" in data and data["kind"] != current.kind and not threshold_given:
        threshold = None  # another kind: the old threshold's unit is not its
    problems, threshold = rule_problems(
        kind=kind,
        threshold=threshold,
        threshold_given=threshold is not None,
        window_sec=window_sec,
        pool=pool,
        has_job=job_id is not None,
    )
    errors: dict[str, list[str]] = {name: [message] for name, message in problems.items()}
    if pool and pool not in registry.pools() and "pool" not in errors:
        errors["pool"] = [f"unknown pool '{pool}'; known: {', '.join(registry.pools())}"]
    job = None
    if job_id is not None and "jobId" not in errors:
        job = job_get(scope=None if tenant is None else [tenant.pk], job_id=job_id)
        if job is None:
            errors["jobId"] = ["no such job" + ("" if tenant is None else f" in tenant {tenant.slug}")]
        elif kind in (AlertKind.MISSED_FIRE, AlertKind.JOB_AUTO_PAUSED) and not job.is_recurring:
            errors["jobId"] = [f"{kind} watches CRON and INTERVAL jobs; this job is {job.type}"]
    if errors:
        raise serializers.ValidationError(errors)
    fields: dict[str, Any] = {
        "kind": kind,
        "threshold": threshold,
        "window_sec": window_sec,
        "pool": pool,
        "job": job,
    }
    for name, attr in (("name", "name"), ("channels", "channels"), ("enabled", "enabled")):
        if name in data:
            fields[attr] = data[name]
    return fields


def _rule_target(rule: AlertRule) -> Target:
    return Target(type="alert_rule", id=str(rule.pk), label=rule.name, job_id=rule.job_id, tenant_id=rule.tenant_id)


@extend_schema_view(
    get=extend_schema(
        summary="List alert rules",
        description="The alert rules the caller may see (a token: its tenant's; a staff session: every rule, "
        "global ones too), newest first.",
    )
)
class AlertRuleListCreateApi(AuditedApi, generics.ListAPIView):
    audit_actions = {"POST": "alert_rule.create"}
    serializer_class = AlertRuleSerializer

    def get_queryset(self):
        return rule_list(scope=scope_of(user=self.request.user))

    @extend_schema(
        summary="Create an alert rule",
        request=AlertRuleInputSerializer,
        responses={201: AlertRuleSerializer},
        description="A rule that fires an alert when its kind's measure breaches `threshold` (over `windowSec` "
        f"where the kind looks back), and notifies its channels when it fires and when it resolves.\n\n{RULE_RULES}",
        examples=examples.ALERT_RULE_CREATE,
    )
    def post(self, request):
        serializer = AlertRuleInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        tenant = _tenant_of_new_rule(request, data.get("tenant"))
        fields = _model_fields(data, tenant=tenant, current=None)
        rule = rule_create(tenant=tenant, fields=fields, actor=actor_of(request))
        self.acting_on(_rule_target(rule), f"{rule.kind} rule")
        headers = {"Location": location(request, "alert-rule-detail", rule_id=rule.pk)}
        return Response(AlertRuleSerializer(rule).data, status=status.HTTP_201_CREATED, headers=headers)


class AlertRuleDetailApi(AuditedApi, APIView):
    audit_actions = {"PATCH": "alert_rule.update", "DELETE": "alert_rule.delete"}
    audit_target_type, audit_id_kwarg = "alert_rule", "rule_id"

    @extend_schema(
        summary="Get an alert rule", description="An alert rule as it is now.", responses=AlertRuleSerializer
    )
    def get(self, request, rule_id):
        return Response(AlertRuleSerializer(_rule_or_404(request, rule_id)).data)

    @extend_schema(
        summary="Change an alert rule",
        request=AlertRuleUpdateSerializer,
        responses=AlertRuleSerializer,
        description="Change the fields given (`enabled: false` turns the rule off); the others keep their values, "
        f"and a rule's tenant never changes.\n\n{RULE_RULES}",
        examples=examples.ALERT_RULE_UPDATE,
    )
    def patch(self, request, rule_id):
        rule = _rule_or_404(request, rule_id)
        self.acting_on(_rule_target(rule))
        serializer = AlertRuleUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = _model_fields(serializer.validated_data, tenant=rule.tenant, current=rule)
        rule = rule_update(rule=rule, fields=fields)
        self.acting_on(_rule_target(rule), "changed " + ", ".join(sorted(serializer.validated_data)))
        return Response(AlertRuleSerializer(rule).data)

    @extend_schema(
        summary="Delete an alert rule",
        description="The rule goes, with its alerts and their notifications.",
        responses={204: None},
    )
    def delete(self, request, rule_id):
        rule = _rule_or_404(request, rule_id)
        self.acting_on(_rule_target(rule))
        rule_delete(rule=rule)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(get=extend_schema(summary="List alerts"))
class AlertListApi(generics.ListAPIView):
    """Active and recent alerts, newest fired first (resolved ones are kept for the retention,
    TICKWORK_RETENTION_DAYS). `?state=FIRING` lists what is active now."""

    serializer_class = AlertSerializer
    filterset_class = AlertFilter
    pagination_class = AlertPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Alert.objects.none()
        return alert_list(scope=scope_of(user=self.request.user))


class AlertDetailApi(APIView):
    @extend_schema(
        summary="Get an alert",
        description="An alert: its rule, what breached (`subject`), when it fired and resolved, and each "
        "notification of it with its state.",
        responses=AlertSerializer,
    )
    def get(self, request, alert_id):
        alert = alert_get(scope=scope_of(user=request.user), alert_id=alert_id)
        if alert is None:
            raise Http404("no such alert")
        return Response(AlertSerializer(alert).data)
