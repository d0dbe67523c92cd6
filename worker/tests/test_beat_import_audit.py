"""`manage.py import_beat` leaves an audit row for each job it creates or updates (job.create,
job.update, OK), with actor kind `cli` and the operating system's user, as the operators' other
commands do; a dry run and a task left unchanged leave none. Beat's database is stood in for by
the tasks it would hold (worker/tests/test_beat_import.py's builders); the whole command against
beat's real tables is tests_e2e/test_e2e_import_beat.py."""

import io

import pytest
from django.core.management import call_command

from audit.models import AuditEntry
from jobs.models import Job
from worker import beat_import
from worker.tests.test_beat_import import cron, task

pytestmark = pytest.mark.django_db


@pytest.fixture
def beat(monkeypatch, settings):
    """What beat's database holds (a list the test changes), read by the command as from --from."""
    monkeypatch.setattr("getpass.getuser", lambda: "ops-alice")
    settings.TICKWORK_CELERY_BRIDGES = {"legacy": {"broker": "memory://"}}
    tasks = [
        cron(name="nightly report", minute="30", hour="2", timezone="Europe/Paris"),
        task(name="heartbeat", every=90, period="seconds", enabled=False),
    ]
    monkeypatch.setattr(beat_import, "read_source", lambda url: tasks)
    return tasks


def import_beat(*flags: str) -> str:
    out = io.StringIO()
    call_command(
        "import_beat", "--from", "sqlite:///beat", "--tenant", "acme", "--bridge", "legacy", *flags, stdout=out
    )
    return out.getvalue()


def test_each_job_created_or_updated_has_its_cli_audit_row(tenant, beat):
    import_beat("--dry-run")
    assert AuditEntry.objects.count() == 0

    import_beat()

    jobs = {job.name: job for job in Job.objects.all()}
    created = list(AuditEntry.objects.order_by("id"))
    assert [(e.action, e.outcome, e.actor, e.actor_kind, e.tenant_id) for e in created] == [
        ("job.create", "OK", "ops-alice", "cli", tenant.pk)
    ] * 2
    assert [(e.target_id, e.job_id, e.target_label) for e in created] == [
        (str(jobs[name].pk), jobs[name].pk, name) for name in ("nightly report", "heartbeat")
    ]
    assert created[0].detail == "import_beat: CRON '30 2 * * *' Europe/Paris → app.tasks.t"
    assert jobs["heartbeat"].state == "PAUSED"  # created paused (disabled in beat), in the row's transaction

    beat[0] = cron(name="nightly report", minute="30", hour="3", timezone="Europe/Paris")
    import_beat()

    updated = AuditEntry.objects.order_by("id")[2:]
    assert [(e.action, e.outcome, e.actor_kind, e.job_id, e.detail) for e in updated] == [
        ("job.update", "OK", "cli", jobs["nightly report"].pk, "import_beat: changed schedule")
    ]


def test_a_one_off_that_ran_is_left_as_it_ended(tenant, beat, drive):
    """A one-off task whose job has run reads COMPLETED (executions/standing.py, its row still
    ACTIVE): a later import that would change it leaves it unchanged, as a cancelled job, with no
    audit row, where asking job_update to change it would be refused."""
    beat[:] = [cron(name="once", minute="0", hour="13", one_off=True)]
    import_beat()
    job = Job.objects.get(name="once")
    drive(job.executions.get(), "SUCCEEDED")
    before = AuditEntry.objects.count()

    beat[:] = [cron(name="once", minute="30", hour="13", one_off=True)]
    out = import_beat()

    assert f"its job {job.pk} is COMPLETED, and is not changed" in out
    assert AuditEntry.objects.count() == before
