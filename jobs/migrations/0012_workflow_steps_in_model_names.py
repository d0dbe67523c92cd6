"""A workflow's steps in the model's names (jobs/workflow.py): `depends_on`, `retry_policy` (with
`max_attempts`, `initial_delay_ms`, `max_delay_ms`) and `timeout_sec`, where they were kept as the
API writes them (`dependsOn`, `retryPolicy.maxAttempts`, `timeoutSec`). Rewrites each workflow
job's steps and the workflow documents its versions keep (a definition's, a change's from and to);
executions 0013 rewrites the runs' steps. A step's target and payload are left as they are.

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


def renamed_workflow(document, step_names, policy_names):
    if not isinstance(document, dict) or "steps" not in document:
        return document
    return {**document, "steps": renamed_steps(document["steps"], step_names, policy_names)}


def _save(model, rows, fields, *, last=False):
    """Write `rows` when a batch is full (or when it is the last): emptied once written."""
    if rows and (last or len(rows) >= BATCH):
        model.objects.bulk_update(rows, fields)
        rows.clear()


def _rename(apps, step_names, policy_names):
    Job = apps.get_model("jobs", "Job")
    jobs = []
    for job in Job.objects.filter(workflow__isnull=False).only("pk", "workflow").iterator(chunk_size=BATCH):
        renamed = renamed_workflow(job.workflow, step_names, policy_names)
        if renamed != job.workflow:
            job.workflow = renamed
            jobs.append(job)
            _save(Job, jobs, ["workflow"])
    _save(Job, jobs, ["workflow"], last=True)

    JobVersion = apps.get_model("jobs", "JobVersion")
    versions = []
    for version in JobVersion.objects.only("pk", "definition", "changes").iterator(chunk_size=BATCH):
        definition = version.definition
        if isinstance(definition, dict) and "workflow" in definition:
            definition = {**definition, "workflow": renamed_workflow(definition["workflow"], step_names, policy_names)}
        changes = [
            {
                **change,
                "from": renamed_workflow(change.get("from"), step_names, policy_names),
                "to": renamed_workflow(change.get("to"), step_names, policy_names),
            }
            if isinstance(change, dict) and change.get("field") == "workflow"
            else change
            for change in version.changes or []
        ]
        if definition != version.definition or changes != (version.changes or []):
            version.definition, version.changes = definition, changes
            versions.append(version)
            _save(JobVersion, versions, ["definition", "changes"])
    _save(JobVersion, versions, ["definition", "changes"], last=True)


def to_model_names(apps, schema_editor):
    _rename(apps, STEP_TO_MODEL, POLICY_TO_MODEL)


def to_api_names(apps, schema_editor):
    _rename(
        apps,
        {model: api for api, model in STEP_TO_MODEL.items()},
        {model: api for api, model in POLICY_TO_MODEL.items()},
    )


class Migration(migrations.Migration):
    dependencies = [("jobs", "0011_version_definitions_in_model_names")]

    operations = [migrations.RunPython(to_model_names, to_api_names)]
