"""The job's fields as the API names them: camelCase over the domain's table (jobs/fields.py),
with the few whose API name is not their model name's (an EVENT job's `on` and `filter`). The
serializers, the versions' definitions and diffs, and the dashboard's form read these names;
web/tests/test_job_fields.py holds every field of the table to one."""

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


def api_path(path: str) -> str:
    """A definition's field path in the API's names: `retry_policy.max_attempts` is
    `retryPolicy.maxAttempts`."""
    return ".".join(API_NAME.get(part, part) for part in path.split("."))


def api_definition(definition: dict[str, Any]) -> dict[str, Any]:
    """A job's definition (jobs.versions) in the API's names; a group's fields renamed too, a
    document (a payload, a workflow, a filter) as it is."""
    return {
        API_NAME.get(name, name): (
            {API_NAME.get(inner, inner): v for inner, v in value.items()}
            if name in GROUPS and isinstance(value, dict)
            else value
        )
        for name, value in definition.items()
    }


def api_changes(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A version's changes with their fields in the API's names."""
    return [{**change, "field": api_path(change["field"])} for change in changes]
