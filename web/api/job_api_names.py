"""The job's fields as the API names them: camelCase over the domain's table (jobs/fields.py),
with the few whose API name is not their model name's (an EVENT job's `on` and `filter`). The
serializers, the versions' definitions and diffs, and the dashboard's form read these names;
web/tests/test_job_fields.py holds every field of the table to one. A workflow's steps are kept
in the model's names too (jobs/workflow.py): `api_workflow` shows one in the API's."""

from typing import Any

from jobs.fields import FIELDS, GROUPS


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# Where the contract's name is not the model's, camelCased.
_SAID_OTHERWISE = {"event_name": "on", "event_filter": "filter"}
API_NAME: dict[str, str] = {
    name: _SAID_OTHERWISE.get(name, _camel(name)) for name in [*(field.name for field in FIELDS), *GROUPS]
}
MODEL_NAME: dict[str, str] = {api: name for name, api in API_NAME.items()}
# A workflow step's keys that the API names otherwise: what a step may set of its own is named as
# the job's field it overrides (jobs/fields.py, `step`), its group's fields too; and what it waits for.
STEP_API_NAME: dict[str, str] = {
    "depends_on": "dependsOn",
    "rate_limit": "rateLimit",  # a step's target's, as the job's target's
    **{name: API_NAME[name] for field in FIELDS if field.step for name in (field.name, field.group) if name},
}


def api_workflow(document: dict[str, Any]) -> dict[str, Any]:
    """A workflow as a job keeps it (jobs/workflow.py) in the API's names: each step's keys and its
    groups' (its target's are the same); its payload, the handler's document, as it is."""
    return {
        **document,
        "steps": [
            {
                STEP_API_NAME.get(key, key): (
                    {STEP_API_NAME.get(inner, inner): v for inner, v in value.items()}
                    if key in GROUPS and isinstance(value, dict)
                    else value
                )
                for key, value in step.items()
            }
            for step in document.get("steps") or []
        ],
    }


def api_path(path: str) -> str:
    """A definition's field path in the API's names: `retry_policy.max_attempts` is
    `retryPolicy.maxAttempts`."""
    return ".".join(API_NAME.get(part, part) for part in path.split("."))


def api_definition(definition: dict[str, Any]) -> dict[str, Any]:
    """A job's definition (jobs.versions) in the API's names; a group's fields renamed too, and a
    workflow's steps; another document (a payload, a filter) as it is."""
    return {API_NAME.get(name, name): _api_value(name, value) for name, value in definition.items()}


def _api_value(name: str, value: Any) -> Any:
    """A definition's value of the field (or group) `name` in the API's names: a group's fields
    renamed, a workflow's steps (api_workflow); another document (a payload, a filter) as it is."""
    if name in GROUPS and isinstance(value, dict):
        return {API_NAME.get(inner, inner): v for inner, v in value.items()}
    if name == "workflow" and isinstance(value, dict):
        return api_workflow(value)
    return value


def api_change(change: dict[str, Any]) -> dict[str, Any]:
    """A version's change (jobs.versions) with its field in the API's names, and a workflow's
    steps, when that is what changed."""
    renamed = {**change, "field": api_path(change["field"])}
    if change["field"] == "workflow":
        for side in ("from", "to"):
            renamed[side] = _api_value("workflow", change.get(side))
    return renamed


def api_changes(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A version's changes in the API's names (api_change)."""
    return [api_change(change) for change in changes]
