"""A run's steps in the model's names (jobs/workflow.py), as jobs 0012 made its job's workflow:
`depends_on`, `retry_policy` (with `max_attempts`, `initial_delay_ms`, `max_delay_ms`) and
`timeout_sec`, where they were kept as the API writes them (`dependsOn`, `retryPolicy.maxAttempts`,
`timeoutSec`). A step's target and payload are left as they are.

The names are written out here, not read from the code: a migration says what the rows were and
became on the day it was written."""

from django.db import migrations

STEP_TO_MODEL = {"dependsOn": "depends_on", "retryPolicy": "retry_policy", "timeoutSec": "timeout_sec"}
POLICY_TO_MODEL = {"maxAttempts": "max_attempts", "initialDelayMs": "initial_delay_ms", "maxDelayMs": "max_delay_ms"}
POLICIES = {"retryPolicy", "retry_policy"}
BATCH = 1000


def renamed_steps(steps, step_names, policy_names):
    """`steps` (a list of step objects) with their keys and their retry policies' renamed."""
    if not isinstance(steps, list):
        return steps
    renamed = []
    for step in steps:
        if not isinstance(step, dict):
            renamed.append(step)
            continue
        kept = {}
        for key, value in step.items():
            if key in POLICIES and isinstance(value, dict):
                value = {policy_names.get(inner, inner): inner_value for inner, inner_value in value.items()}
            kept[step_names.get(key, key)] = value
        renamed.append(kept)
    return renamed


def _rename(apps, step_names, policy_names):
    Run = apps.get_model("executions", "Run")
    batch = []
    for run in Run.objects.only("pk", "steps").iterator(chunk_size=BATCH):
        renamed = renamed_steps(run.steps, step_names, policy_names)
        if renamed != run.steps:
            run.steps = renamed
            batch.append(run)
        if len(batch) == BATCH:
            Run.objects.bulk_update(batch, ["steps"])
            batch = []
    if batch:
        Run.objects.bulk_update(batch, ["steps"])


def to_model_names(apps, schema_editor):
    _rename(apps, STEP_TO_MODEL, POLICY_TO_MODEL)


def to_api_names(apps, schema_editor):
    _rename(
        apps,
        {model: api for api, model in STEP_TO_MODEL.items()},
        {model: api for api, model in POLICY_TO_MODEL.items()},
    )


class Migration(migrations.Migration):
    dependencies = [("executions", "0012_error_trgm_partial")]

    operations = [migrations.RunPython(to_model_names, to_api_names)]
