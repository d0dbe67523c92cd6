"""A job's create body in the schema, as the API checks it: one variant per type and per what it
runs (a target or a workflow), so that a body the schema calls valid says when the job fires in
the one way its type takes (web/api/job_serializers.py, JobInputSerializer.validate).

The serializer's own schema (every field optional but `name` and `type`) allows
a ONCE job with a schedule or a job with a target and a workflow, which the API refuses; a client
generated from it, or schemathesis, could not tell a job it can create. Each variant lists the
fields its type takes, the one that says when it fires as required; another type's field only
where the API takes it too (null, or `timezone` "UTC", or an empty `filter`). What OpenAPI 3.0
cannot state stays in the operation's description (JOB_RULES): the payload's shape per handler,
`maxDelayMs` at least `initialDelayMs`, a token's own tenant, a schedule that never fires.

An update's body stays the serializer's (every field optional): what it may hold depends on the
stored job, its type and whether it runs a target or a workflow. Variants per type there were
tried: schemathesis then sent each type's body to jobs of every type, refused as it should be."""

import copy
from typing import Any

from jobs.models import JobType

# Each type's own fields, the one that says when it fires first.
_TIMING: dict[str, tuple[str, ...]] = {
    JobType.ONCE: ("runAt",),
    JobType.DELAYED: ("delaySec",),
    JobType.CRON: ("schedule", "timezone", "startAt"),
    JobType.INTERVAL: ("everySec", "startAt"),
    JobType.EVENT: ("on", "filter", "debounceSec", "debounceMaxSec"),
}
# What another type's field may be, where the API takes it (JobInputSerializer.validate): None,
# where it is not taken at all.
_ELSEWHERE: dict[str, dict[str, Any] | None] = {
    "runAt": {"type": "string", "nullable": True, "enum": [None]},
    "delaySec": {"type": "integer", "nullable": True, "enum": [None]},
    "everySec": {"type": "integer", "nullable": True, "enum": [None]},
    "startAt": {"type": "string", "nullable": True, "enum": [None]},
    # A pattern, not a one-value enum: a client generated from the schema keeps `timezone` a string.
    "timezone": {"type": "string", "pattern": "^UTC$"},
    "filter": {"allOf": [{"$ref": "#/components/schemas/EventFilter"}], "nullable": True, "maxProperties": 0},
    "schedule": None,
    "on": None,
    "debounceSec": {"type": "integer", "nullable": True, "enum": [None]},
    "debounceMaxSec": {"type": "integer", "nullable": True, "enum": [None]},
}
# An EVENT job's fields that only a job with a target takes: a workflow job is not debounced.
_TARGET_ONLY = ("debounceSec", "debounceMaxSec")
_RUNS = {"target": ("target", "payload"), "workflow": ("workflow",)}
COMPONENT = "JobInputRequest"  # its name kept: generated clients know it
TYPE_ENUM = "#/components/schemas/JobTypeEnum"
_WHAT = ("type", "target", "workflow", "payload")


def _variant(fields: dict[str, Any], kind: str, runs: str) -> dict[str, Any]:
    """The properties a job of `kind` that runs a `runs` (target or workflow) takes."""
    own = _TIMING[kind]
    properties: dict[str, Any] = {}
    for name, schema in fields.items():
        if name == "type":
            # The one job type enum, narrowed to this variant's type: a client generated from the
            # schema has one JobTypeEnum for a create, an update and an answer alike.
            properties[name] = {"allOf": [{"$ref": TYPE_ENUM}], "enum": [kind]}
        elif name in _TARGET_ONLY and runs == "workflow":
            properties[name] = dict(_ELSEWHERE[name])  # type: ignore[arg-type]
        elif name in own or name in _RUNS[runs] or (name not in _ELSEWHERE and name not in _WHAT):
            properties[name] = copy.deepcopy(schema)
        elif _ELSEWHERE.get(name) is not None:
            properties[name] = dict(_ELSEWHERE[name])  # type: ignore[arg-type]
    return properties


def job_create_variants(components: dict[str, Any]) -> None:
    """Make COMPONENT, the serializer's, oneOf its variants, which are made from it."""
    base = components[COMPONENT]
    variants = []
    for kind, own in _TIMING.items():
        for runs in _RUNS:
            properties = _variant(base["properties"], kind, runs)
            properties[own[0]].pop("nullable", None)  # what says when it fires is given
            name = f"Job{kind.title()}{runs.title()}Request"
            components[name] = {
                "type": "object",
                "properties": properties,
                "required": ["name", "type", own[0], runs],
                "additionalProperties": False,
            }
            variants.append({"$ref": f"#/components/schemas/{name}"})
    components[COMPONENT] = {
        "oneOf": variants,
        "description": "A job: its `type` decides the field that says when it fires, and it runs a `target` or a "
        "`workflow` of steps. " + base.get("description", ""),
    }


def job_update_target(components: dict[str, Any]) -> None:
    """An update may name its target's pool alone (TargetSerializer: the handler stays the
    job's), so the update's `target` requires nothing; a create's and a step's name a handler."""
    patched = copy.deepcopy(components["TargetRequest"])
    patched.pop("required", None)
    components["PatchedTargetRequest"] = patched
    target = components["PatchedJobUpdateRequest"]["properties"]["target"]
    target["allOf"] = [{"$ref": "#/components/schemas/PatchedTargetRequest"}]
