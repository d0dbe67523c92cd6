"""jobs.versions: the definition a version keeps, the diff between two, and the set-based writer
(its cost per call, its numbering under concurrent updates)."""

import importlib
import itertools
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Job, JobVersion
from jobs.versions import changes_between, definition_of, version_list, version_one, versions_record
from scheduling.job_changes import job_update
from tenants.services import tenant_create

NOW = datetime(2031, 3, 14, 9, 0, tzinfo=UTC)
RENAME = importlib.import_module("jobs.migrations.0011_version_definitions_in_model_names")


def _unsaved_jobs(tenant, count: int) -> list[Job]:
    return [
        Job(
            tenant=tenant,
            name=f"job {i}",
            type="CRON",
            schedule="0 * * * *",
            pool="default",
            handler="noop",
            payload={"i": i},
            next_fire_at=NOW,
            created_by="bulk",
        )
        for i in range(count)
    ]


def test_changes_name_nested_fields_by_a_dotted_name_and_a_payload_whole():
    old = {"name": "a", "target": {"pool": "p", "handler": "h"}, "payload": {"x": 1, "y": 2}, "run_at": "T"}
    new = {"name": "a", "target": {"pool": "q", "handler": "h"}, "payload": {"x": 1, "y": 3}, "delay_sec": 5}

    assert changes_between(old, new) == [
        {"field": "target.pool", "from": "p", "to": "q"},
        {"field": "payload", "from": {"x": 1, "y": 2}, "to": {"x": 1, "y": 3}},
        {"field": "delay_sec", "from": None, "to": 5},
        {"field": "run_at", "from": "T", "to": None},
    ]
    assert changes_between(new, new) == []


@pytest.mark.django_db
def test_the_definition_has_the_timing_fields_of_the_jobs_type_only(make_job):
    tenant = tenant_create(slug="acme")
    once = make_job(tenant, type="ONCE", run_at=NOW + timedelta(hours=1, microseconds=5))
    delayed = make_job(tenant, type="DELAYED", delay_sec=60)
    cron = make_job(tenant, type="CRON", schedule="*/5 * * * *", timezone="Europe/Paris")

    assert definition_of(once)["run_at"] == "2031-03-14T10:00:00.000005Z"
    assert {"delay_sec", "schedule", "timezone"}.isdisjoint(definition_of(once))
    assert definition_of(delayed)["delay_sec"] == 60
    assert {"run_at", "schedule", "timezone"}.isdisjoint(definition_of(delayed))
    assert (definition_of(cron)["schedule"], definition_of(cron)["timezone"]) == ("*/5 * * * *", "Europe/Paris")
    assert {"run_at", "delay_sec"}.isdisjoint(definition_of(cron))


@pytest.mark.django_db
def test_recording_1000_jobs_costs_a_constant_number_of_statements():
    """A thousand jobs changed for the first time get their version 1 (from their rows before the
    change) and version 2 from one read and one INSERT (on SQLite, the INSERT in Django's batches
    of 999 variables); ten jobs cost the same read and the same INSERT."""
    tenant = tenant_create(slug="acme")
    few, many = Job.objects.bulk_create(_unsaved_jobs(tenant, 10)), Job.objects.bulk_create(_unsaved_jobs(tenant, 1000))
    before = {job.pk: version_one(job) for job in few + many}
    for job in few + many:
        job.timeout_sec = 60

    with CaptureQueriesContext(connection) as small:
        versions_record(jobs=few, actor="editor", now=NOW, before=before)
    with CaptureQueriesContext(connection) as large:
        versions_record(jobs=many, actor="editor", now=NOW, before=before)

    assert len(small) == 2
    if connection.vendor == "postgresql":
        assert len(large) == 2
    else:  # one read, and the INSERT of 2,000 versions in batches of 999 // 6 columns
        assert len(large) == 1 + -(-2000 // (999 // 6))
    assert JobVersion.objects.filter(number=1, changes=[], actor="bulk").count() == 1010
    assert JobVersion.objects.filter(number=2, actor="editor").count() == 1010
    assert JobVersion.objects.get(job=many[7], number=1).definition["payload"] == {"i": 7}
    assert JobVersion.objects.get(job=many[7], number=1).definition["timeout_sec"] == 3600


@pytest.mark.django_db
def test_recording_writes_the_next_number_only_for_jobs_whose_definition_changed():
    """A job whose definition did not change gets no version, and its row stays its version 1; a
    job's first change stores its version 1 with version 2, a later change version 3 alone."""
    tenant = tenant_create(slug="acme")
    jobs = Job.objects.bulk_create(_unsaved_jobs(tenant, 300))
    before = {job.pk: version_one(job) for job in jobs}
    for job in jobs[:100]:
        job.timeout_sec = 60

    with CaptureQueriesContext(connection) as queries:
        versions_record(jobs=jobs, actor="editor", now=NOW + timedelta(minutes=1), before=before)

    assert len(queries) <= 3
    assert JobVersion.objects.filter(number=1).count() == JobVersion.objects.filter(number=2).count() == 100
    assert JobVersion.objects.get(job=jobs[0], number=2).changes == [{"field": "timeout_sec", "from": 3600, "to": 60}]
    assert not JobVersion.objects.filter(job=jobs[150]).exists()
    [unchanged] = version_list(job=jobs[150])
    assert (unchanged.number, unchanged.actor, unchanged.definition) == (1, "bulk", definition_of(jobs[150]))

    for job in jobs[:10]:
        job.timeout_sec = 30
    versions_record(jobs=jobs[:100], actor="editor", now=NOW + timedelta(minutes=2), before=before)
    assert JobVersion.objects.filter(number=3).count() == 10
    assert JobVersion.objects.filter(number=1).count() == 100  # stored once, at the first change
    versions_record(jobs=[], actor="nobody", now=NOW, before={})  # nothing to do, nothing asked


@pytest.mark.django_db(transaction=True)
def test_concurrent_updates_of_one_job_number_their_versions_without_duplicates(make_job):
    """Eight threads, each with its own connection, update one job at once with different names:
    every update commits (the row lock makes them take turns) and versions 1..9 exist once each."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks and concurrent connections: PostgreSQL (DATABASE_URL)")
    tenant = tenant_create(slug="acme")
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    threads = 8
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            job_update(job=job, fields={"name": f"name {index}"}, now=datetime.now(UTC), actor=f"thread {index}")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)

    assert not errors, errors
    numbers = list(JobVersion.objects.filter(job=job).order_by("number").values_list("number", flat=True))
    assert numbers == list(range(1, threads + 2))
    # Each version's diff is against the one before it: the chain of names is unbroken.
    chain = list(JobVersion.objects.filter(job=job).order_by("number"))
    for before, after in itertools.pairwise(chain):
        assert after.changes == [{"field": "name", "from": before.definition["name"], "to": after.definition["name"]}]
    assert chain[-1].definition["name"] == Job.objects.get(pk=job.pk).name


@pytest.mark.django_db
def test_the_data_migration_gives_every_job_without_versions_its_version_1(make_job, monkeypatch):
    """Jobs from before versions were kept get version 1, by "migration", with the shape the
    writer gives (so a first update's diff shows only what it changed); jobs with versions keep theirs."""
    migration = importlib.import_module("jobs.migrations.0004_job_versions_backfill")
    monkeypatch.setattr(migration, "CHUNK", 3)
    tenant = tenant_create(slug="acme")
    jobs = [make_job(tenant, type=kind) for kind in ("ONCE", "DELAYED", "CRON", "CRON", "ONCE", "ONCE", "CRON")]
    kept = jobs[0]
    JobVersion.objects.create(job=kept, number=1, definition=definition_of(kept), changes=[], actor="", created_at=NOW)

    migration.backfill(apps, None)

    assert JobVersion.objects.count() == len(jobs)
    assert JobVersion.objects.get(job=kept).actor == ""
    for job in jobs[1:]:
        version = JobVersion.objects.get(job=job)
        assert (version.number, version.changes, version.actor) == (1, [], "migration")
        # In the API's names, as versions were kept then: migration 0011 renames them.
        assert RENAME.renamed_definition(version.definition, RENAME.TO_MODEL) == definition_of(job)


@pytest.mark.django_db
def test_versions_stored_in_the_apis_names_are_renamed_to_the_models_and_back(make_job):
    """Migration 0011: a definition and its changes kept in the API's names (camelCase) are in the
    model's after it, which is what versions_record compares a job with (no spurious version
    follows), and in the API's again when it is reversed. Documents (a payload) keep their keys."""
    job = make_job(tenant_create(slug="acme"), type="CRON", payload={"maxAttempts": 1})
    old = {
        "name": job.name,
        "type": "CRON",
        "schedule": job.schedule,
        "timezone": job.timezone,
        "target": {"pool": job.pool, "handler": job.handler},
        "payload": {"maxAttempts": 1},
        "retryPolicy": {
            "maxAttempts": 3,
            "backoff": "EXPONENTIAL",
            "initialDelayMs": 1000,
            "maxDelayMs": 60000,
            "jitter": True,
        },
        "timeoutSec": 3600,
        "priority": "NORMAL",
        "misfirePolicy": "RUN_ONCE",
        "concurrencyPolicy": "ALLOW",
    }
    changes = [{"field": "retryPolicy.maxAttempts", "from": 2, "to": 3}, {"field": "timeoutSec", "from": 1, "to": 3600}]
    JobVersion.objects.create(job=job, number=1, definition=old, changes=[], actor="", created_at=NOW)
    JobVersion.objects.create(job=job, number=2, definition=old, changes=changes, actor="", created_at=NOW)

    RENAME.to_model_names(apps, None)

    latest = JobVersion.objects.get(job=job, number=2)
    assert latest.definition == definition_of(job)
    assert latest.changes == [
        {"field": "retry_policy.max_attempts", "from": 2, "to": 3},
        {"field": "timeout_sec", "from": 1, "to": 3600},
    ]
    versions_record(jobs=[job], actor="a", now=NOW, before={})
    assert JobVersion.objects.filter(job=job).count() == 2  # the same definition: no version 3

    RENAME.to_api_names(apps, None)

    assert JobVersion.objects.get(job=job, number=2).definition == old
    assert JobVersion.objects.get(job=job, number=2).changes == changes
