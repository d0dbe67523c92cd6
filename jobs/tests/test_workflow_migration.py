"""Migrations jobs 0012 and executions 0013: a workflow's steps kept in the API's names (as they
were before) are in the model's after them, wherever they are kept (a job's workflow, a run's
steps, a version's definition and its changes), and in the API's again when they are reversed."""

import importlib
from datetime import UTC, datetime

import pytest
from django.apps import apps

from executions.models import Run
from jobs.models import Job, JobVersion
from tenants.services import tenant_create

JOBS = importlib.import_module("jobs.migrations.0012_workflow_steps_in_model_names")
RUNS = importlib.import_module("executions.migrations.0013_run_steps_in_model_names")
NOW = datetime(2030, 1, 1, tzinfo=UTC)

# The JSON documents are rewritten by each store's own JSON (jsonb, SQLite's JSON1): both run it.
pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def _steps(depends_on, retry_policy, max_attempts, initial_delay_ms, timeout_sec):
    return [
        # A payload is the handler's document: its keys stay as they are, whatever they look like.
        {"name": "a", "target": {"pool": "default", "handler": "noop"}, "payload": {"dependsOn": 1}, depends_on: []},
        {
            "name": "b",
            "target": {"pool": "default", "handler": "noop"},
            "payload": {},
            depends_on: ["a"],
            retry_policy: {max_attempts: 2, "backoff": "FIXED", initial_delay_ms: 5, "jitter": False},
            timeout_sec: 30,
        },
    ]


API = _steps("dependsOn", "retryPolicy", "maxAttempts", "initialDelayMs", "timeoutSec")
MODEL = _steps("depends_on", "retry_policy", "max_attempts", "initial_delay_ms", "timeout_sec")


def test_workflow_steps_kept_in_the_apis_names_are_renamed_to_the_models_and_back(make_job):
    tenant = tenant_create(slug="acme")
    job = make_job(tenant, type="CRON", pool="", handler="", workflow={"steps": MODEL})
    plain = make_job(tenant, type="CRON", payload={"dependsOn": []})
    Job.objects.filter(pk=job.pk).update(workflow={"steps": API})
    run = Run.objects.create(job=job, tenant=tenant, scheduled_for=NOW, steps=API, created_at=NOW)
    definition = {"name": job.name, "type": "CRON", "workflow": {"steps": API}}
    changes = [
        {"field": "workflow", "from": {"steps": API[:1]}, "to": {"steps": API}},
        {"field": "timeout_sec", "from": 1, "to": 2},
    ]
    JobVersion.objects.filter(job=job).delete()
    JobVersion.objects.create(job=job, number=1, definition=definition, changes=changes, actor="", created_at=NOW)

    JOBS.to_model_names(apps, None)
    RUNS.to_model_names(apps, None)

    assert Job.objects.get(pk=job.pk).workflow == {"steps": MODEL}
    assert Job.objects.get(pk=plain.pk).workflow is None
    assert Job.objects.get(pk=plain.pk).payload == {"dependsOn": []}
    assert Run.objects.get(pk=run.pk).steps == MODEL
    version = JobVersion.objects.get(job=job, number=1)
    assert version.definition == {**definition, "workflow": {"steps": MODEL}}
    assert version.changes == [
        {"field": "workflow", "from": {"steps": MODEL[:1]}, "to": {"steps": MODEL}},
        {"field": "timeout_sec", "from": 1, "to": 2},
    ]

    JOBS.to_api_names(apps, None)
    RUNS.to_api_names(apps, None)

    assert Job.objects.get(pk=job.pk).workflow == {"steps": API}
    assert Run.objects.get(pk=run.pk).steps == API
    version = JobVersion.objects.get(job=job, number=1)
    assert version.definition == definition
    assert version.changes == changes
