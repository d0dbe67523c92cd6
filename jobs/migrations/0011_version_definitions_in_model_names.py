"""A version's definition and changes in the model's names (jobs/fields.py), not the API's: the
domain speaks snake_case, and the API renames them as it shows them (web/api/job_api_names.py).

The names are written out here, not read from the table: a migration says what the rows were and
became on the day it was written."""

from django.db import migrations

TO_MODEL = {
    "runAt": "run_at",
    "delaySec": "delay_sec",
    "everySec": "every_sec",
    "startAt": "start_at",
    "on": "event_name",
    "filter": "event_filter",
    "retryPolicy": "retry_policy",
    "timeoutSec": "timeout_sec",
    "misfirePolicy": "misfire_policy",
    "concurrencyPolicy": "concurrency_policy",
    "maxAttempts": "max_attempts",
    "initialDelayMs": "initial_delay_ms",
    "maxDelayMs": "max_delay_ms",
}
TO_API = {model: api for api, model in TO_MODEL.items()}
# Objects of their own in a definition, whose keys are field names too (a workflow's steps and a
# payload are documents: their keys stay as they are).
NESTED = {"target", "retryPolicy", "retry_policy"}


def renamed_definition(definition, names):
    if not isinstance(definition, dict):
        return definition
    renamed = {}
    for key, value in definition.items():
        if key in NESTED and isinstance(value, dict):
            value = {names.get(inner, inner): inner_value for inner, inner_value in value.items()}
        renamed[names.get(key, key)] = value
    return renamed


def renamed_changes(changes, names):
    return [
        {**change, "field": ".".join(names.get(part, part) for part in str(change.get("field", "")).split("."))}
        for change in changes or []
    ]


def _rename(apps, names):
    JobVersion = apps.get_model("jobs", "JobVersion")
    batch = []
    for version in JobVersion.objects.only("pk", "definition", "changes").iterator(chunk_size=1000):
        version.definition = renamed_definition(version.definition, names)
        version.changes = renamed_changes(version.changes, names)
        batch.append(version)
        if len(batch) == 1000:
            JobVersion.objects.bulk_update(batch, ["definition", "changes"])
            batch = []
    if batch:
        JobVersion.objects.bulk_update(batch, ["definition", "changes"])


def to_model_names(apps, schema_editor):
    _rename(apps, TO_MODEL)


def to_api_names(apps, schema_editor):
    _rename(apps, TO_API)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0010_interval_jobs")]

    operations = [migrations.RunPython(to_model_names, to_api_names)]
