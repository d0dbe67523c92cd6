"""A job's `workflow` (its steps, instead of a `target`) and an EVENT job's `on` and `filter`, as
the API takes them. The graph's rules (unique names, known dependencies, no cycle, at most 100
steps) are jobs/workflow.py's; each step's target, payload and policies are checked as a job's."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from jobs import registry, workflow
from jobs.payloads import StrictSerializer
from web.api.job_api_names import MODEL_NAME, api_workflow
from web.api.job_fields import PayloadField, RetryPolicySerializer, TargetSerializer, payload_problem

NAME_PATTERN = r"^[A-Za-z0-9_.:-]{1,100}$"


def payload_object(value: Any) -> dict:
    """A payload as a job or a step takes it (job_fields.payload_problem), or a ValidationError."""
    if problem := payload_problem(value):
        raise serializers.ValidationError(problem)
    return value


class StepRetryPolicySerializer(RetryPolicySerializer):
    """A step's retry policy: what it names, without defaults; the rest is its job's when a run
    is made (scheduling.runs.run_steps), on a create as on an update."""

    def get_fields(self):
        fields = super().get_fields()
        for field in fields.values():
            field.default = empty
        return fields


class WorkflowStepSerializer(StrictSerializer):
    name = serializers.RegexField(
        NAME_PATTERN, max_length=100, help_text="Unique in the workflow: letters, digits, `_ . : -`."
    )
    target = TargetSerializer()
    payload = PayloadField(required=False, default=dict)
    dependsOn = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        default=list,
        max_length=workflow.MAX_STEPS,
        help_text="The steps that must succeed before this one starts; none: it starts with the run.",
    )
    retryPolicy = StepRetryPolicySerializer(required=False, help_text="What it does not name: the job's.")
    timeoutSec = serializers.IntegerField(
        min_value=1, max_value=7 * 86400, required=False, help_text="Default: the job's."
    )

    def validate_payload(self, value: Any) -> Any:
        return payload_object(value)

    def validate(self, attrs):
        # A policy may name part of it (the rest is the job's when a run is made).
        policy = attrs.get("retryPolicy") or {}
        if {"maxDelayMs", "initialDelayMs"} <= policy.keys() and policy["maxDelayMs"] < policy["initialDelayMs"]:
            raise serializers.ValidationError({"retryPolicy": {"maxDelayMs": ["must be at least initialDelayMs"]}})
        spec = registry.get(attrs["target"]["handler"])
        errors = registry.payload_errors(spec, attrs["payload"]) if spec is not None else None
        if errors:
            raise serializers.ValidationError({"payload": errors})
        if len(set(attrs["dependsOn"])) != len(attrs["dependsOn"]):
            raise serializers.ValidationError({"dependsOn": ["names a step twice"]})
        return attrs


class WorkflowSerializer(StrictSerializer):
    steps = serializers.ListField(
        child=WorkflowStepSerializer(),
        min_length=1,
        max_length=workflow.MAX_STEPS,
        help_text=f"1 to {workflow.MAX_STEPS} steps; their dependencies must form no cycle.",
    )

    def to_internal_value(self, data):
        # An update replaces a job's workflow whole, so it is checked whole, as a create's is.
        # DRF's partial update (what is not given stays as it is) reaches nested fields through
        # the root serializer and would let a step without its name or target through, as if
        # the missing parts came from somewhere: an unbound copy has no partial root.
        if self.root is not self and getattr(self.root, "partial", False):
            return WorkflowSerializer().to_internal_value(data)
        return super().to_internal_value(data)

    def validate_steps(self, steps: list[dict]) -> list[dict]:
        errors = workflow.structure_errors([_stored_step(step) for step in steps])
        if errors:
            raise serializers.ValidationError(errors)
        return steps

    @staticmethod
    def stored(data: dict[str, Any]) -> dict[str, Any]:
        """The validated workflow as the job keeps it (jobs/workflow.py, the model's names): each
        step's target resolved, policies only where the step gives them."""
        return {"steps": [_stored_step(step) for step in data["steps"]]}


def _stored_step(step: dict[str, Any]) -> dict[str, Any]:
    """A validated step (the API's names) as a job keeps it (the model's: api_workflow's inverse)."""
    kept = {
        "name": step["name"],
        # Its rate limit only when it names one, in the model's name (jobs/workflow.py).
        "target": {
            "handler": step["target"]["handler"],
            "pool": step["target"]["pool"],
            **({"rate_limit": step["target"]["rateLimit"]} if step["target"].get("rateLimit") else {}),
        },
        "payload": step["payload"],
        "depends_on": list(step["dependsOn"]),
    }
    if "retryPolicy" in step:
        kept["retry_policy"] = {MODEL_NAME[name]: value for name, value in step["retryPolicy"].items()}
    if "timeoutSec" in step:
        kept["timeout_sec"] = step["timeoutSec"]
    return kept


@extend_schema_field(WorkflowSerializer)
class WorkflowField(serializers.JSONField):
    """A job's workflow in an answer: as stored (WorkflowSerializer.stored), in the API's names
    (api_workflow), and described by the schema as the steps a request gives."""

    def to_representation(self, value):
        return api_workflow(value)


@extend_schema_field(
    {
        "type": "object",
        # OpenAPI 3.0 has no list of types: one schema per type, null through `nullable`.
        "additionalProperties": {
            "anyOf": [{"type": "string", "nullable": True}, {"type": "number"}, {"type": "boolean"}]
        },
        "maxProperties": 50,
        "description": "An EVENT job runs for an event whose payload has each of these top-level keys with "
        'exactly this value (1 and "1" differ). Absent or {}: every event of its name.',
    },
    component_name="EventFilter",
)
class EventFilterField(serializers.JSONField):
    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object of top-level payload keys and values")
        if len(value) > 50:
            raise serializers.ValidationError("may hold at most 50 keys")
        for key, item in value.items():
            if isinstance(item, dict | list):
                raise serializers.ValidationError(f"key '{key}': a value must be a string, number, boolean or null")
        return payload_object(value)
