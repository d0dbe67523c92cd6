"""`manage.py import_beat` against django-celery-beat's real tables: django-celery-beat (a test
requirement only, never the product's) migrates a database of the test's own, the test fills it
with every kind of PeriodicTask, and the import's dry run, real run, second run and
--disable-source are checked job by job and line by line. Then the imported jobs reach a Celery
app that Tickwork does not own (testing/legacy_celery.py) through the `celery` handler: the
2-second interval job by itself, the crontab job when triggered."""

import io
import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from jobs.models import Job
from testing import legacy_celery
from testing.harness import ROOT, database_url, wait_for

pytestmark = pytest.mark.e2e

# Run with testing.beat_settings (manage.py shell): the tasks a team's beat holds, one of each kind.
FILL = r"""
import json
from datetime import timedelta
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask, PeriodicTasks, SolarSchedule,
)

now = timezone.now()
paris = CrontabSchedule.objects.create(minute="30", hour="2", timezone="Europe/Paris")
weekdays = CrontabSchedule.objects.create(
    minute="*/15", hour="9-17", day_of_week="mon-fri", timezone="America/New_York"
)
first_monday = CrontabSchedule.objects.create(minute="0", hour="8", day_of_week="1", day_of_month="1-7")
every_90s = IntervalSchedule.objects.create(every=90, period="seconds")
every_2s = IntervalSchedule.objects.create(every=2, period="seconds")
hourly = IntervalSchedule.objects.create(every=1, period="hours")
launch = ClockedSchedule.objects.create(clocked_time=now + timedelta(days=3))
sunrise = SolarSchedule.objects.create(event="sunrise", latitude=48.85, longitude=2.35)
task = PeriodicTask.objects.create
task(name="nightly report", task="reports.tasks.nightly", crontab=paris,
     args=json.dumps(["eu"]), kwargs=json.dumps({"full": True}), queue=QUEUE)
task(name="weekday digest", task="reports.tasks.nightly", crontab=weekdays, start_time=now + timedelta(days=10))
task(name="first monday", task="reports.tasks.nightly", crontab=first_monday)
task(name="heartbeat", task="monitoring.tasks.poll", interval=every_90s, last_run_at=now - timedelta(seconds=30))
task(name="fast poll", task="monitoring.tasks.poll", interval=every_2s, queue=QUEUE)
task(name="launch", task="reports.tasks.nightly", clocked=launch, one_off=True)
task(name="one shot", task="reports.tasks.nightly", crontab=paris, one_off=True)
task(name="paused cleanup", task="monitoring.tasks.poll", interval=hourly, enabled=False)
task(name="sunrise", task="monitoring.tasks.poll", solar=sunrise)
task(name="expiring", task="monitoring.tasks.poll", crontab=paris, expires=now + timedelta(days=1), priority=5)
changed = str(PeriodicTasks.last_change())
print(json.dumps({"now": now.isoformat(), "launch": launch.clocked_time.isoformat(), "last_update": changed}))
"""

# Run with testing.beat_settings: what the source says of each task afterwards.
READ = r"""
import json
from django_celery_beat.models import PeriodicTask, PeriodicTasks
print(json.dumps({
    "enabled": {t.name: t.enabled for t in PeriodicTask.objects.all()},
    "last_update": str(PeriodicTasks.last_change()),
}))
"""

# Run with testing.beat_settings: the nightly crontab (shared by three tasks) moved to 03:30.
MOVE = r"""
from django_celery_beat.models import PeriodicTask
crontab = PeriodicTask.objects.get(name="nightly report").crontab
crontab.hour = "3"
crontab.save()
print("{}")
"""


@pytest.fixture
def beat_source(tmp_path):
    """A database of django-celery-beat's tables, as beat's own migrations make them: a scratch
    PostgreSQL database on the PostgreSQL run, a SQLite file on the embedded one."""
    if connection.vendor == "postgresql":
        import psycopg

        name = f"tickwork_beat_{uuid.uuid4().hex[:8]}"
        admin = database_url().rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = admin.rsplit("/", 1)[0] + f"/{name}"
    else:
        url = f"sqlite:///{tmp_path / 'beat.sqlite3'}"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TICKWORK_", "DJANGO_", "DATABASE_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="testing.beat_settings",
        TICKWORK_BEAT_SOURCE_URL=url,
        TICKWORK_VAR_DIR=str(tmp_path / "beat-var"),
    )

    def manage(*args: str) -> str:
        run = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
        return run.stdout

    manage("migrate", "django_celery_beat", "--no-input")
    try:
        yield url, lambda code: json.loads(manage("shell", "-c", code).strip().splitlines()[-1])
    finally:
        if connection.vendor == "postgresql":
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _import(url: str, *flags: str) -> list[str]:
    out = io.StringIO()
    call_command("import_beat", "--from", url, "--tenant", "acme", "--bridge", "legacy", *flags, stdout=out)
    return out.getvalue().splitlines()


def _line(lines: list[str], verb: str, name: str) -> str:
    found = [line for line in lines if line.startswith(f"{verb:<10} {name}")]
    assert found, f"no '{verb} {name}' line in:\n" + "\n".join(lines)
    return found[0]


def test_import_beat_brings_every_kind_of_task_over_and_its_jobs_reach_the_celery_app(
    api, tenant, live, settings, tmp_path, beat_source
):
    url, shell = beat_source
    backend = f"redis://127.0.0.1:6379/{int(os.environ.get('TICKWORK_TEST_REDIS_DB', '3'))}"
    legacy = legacy_celery.Legacy(tmp_path, backend)
    bridges = {"legacy": {"broker": legacy_celery.AMQP, "resultBackend": backend}}
    settings.TICKWORK_CELERY_BRIDGES = bridges
    live.base_env["TICKWORK_CELERY_BRIDGES"] = json.dumps(bridges)
    try:
        filled = shell(f"QUEUE = {legacy.queue!r}\n" + FILL)

        # --- the dry run: the whole report, nothing written ---------------------------------------
        dry = _import(url, "--dry-run", "--disable-source")
        assert Job.objects.count() == 0
        assert dry[-2:] == [
            "10 tasks: 8 created, 0 updated, 0 unchanged, 2 skipped (dry run: nothing written)",
            "--disable-source: nothing disabled in a dry run",
        ]
        assert "CRON '30 2 * * *' Europe/Paris → reports.tasks.nightly on queue" in _line(
            dry, "created", "nightly report"
        )
        assert "both restricted" in _line(dry, "skipped", "first monday")
        assert "solar schedule (sunrise)" in _line(dry, "skipped", "sunrise")
        assert "expires not carried" in dry[dry.index(_line(dry, "created", "expiring")) + 1]
        assert "priority 5 not carried" in dry[dry.index(_line(dry, "created", "expiring")) + 2]
        assert "(PAUSED: disabled in beat)" in _line(dry, "created", "paused cleanup")

        # --- the real run: one job per task, as beat meant it ---------------------------------------
        real = _import(url)
        assert real[-1] == "10 tasks: 8 created, 0 updated, 0 unchanged, 2 skipped"
        jobs = {job.name: job for job in Job.objects.filter(tenant=tenant)}
        assert set(jobs) == {
            "nightly report", "weekday digest", "heartbeat", "fast poll",
            "launch", "one shot", "paused cleanup", "expiring",
        }  # fmt: skip
        nightly = jobs["nightly report"]
        assert (nightly.type, nightly.schedule, nightly.timezone, nightly.handler) == (
            "CRON", "30 2 * * *", "Europe/Paris", "celery",
        )  # fmt: skip
        assert nightly.payload == {
            "bridge": "legacy", "task": "reports.tasks.nightly", "args": ["eu"], "kwargs": {"full": True},
            "queue": legacy.queue,
        }  # fmt: skip
        digest = jobs["weekday digest"]
        assert (digest.schedule, digest.timezone) == ("*/15 9-17 * * 1-5", "America/New_York")
        assert digest.next_fire_at >= digest.start_at > nightly.created_at + timedelta(days=9)
        heartbeat = jobs["heartbeat"]
        assert (heartbeat.type, heartbeat.every_sec) == ("INTERVAL", 90)
        # A period after its last run (30 s before the fill), not after the import, which a loaded
        # machine may run seconds later.
        assert heartbeat.start_at.isoformat() == ((Job.objects.get(pk=heartbeat.pk).start_at).isoformat())
        assert heartbeat.start_at == datetime.fromisoformat(filled["now"]) + timedelta(seconds=60)
        assert (jobs["launch"].type, jobs["launch"].run_at.isoformat()) == ("ONCE", filled["launch"])
        assert jobs["one shot"].type == "ONCE" and jobs["one shot"].next_fire_at.minute == 30
        assert jobs["paused cleanup"].state == "PAUSED" and all(
            job.state == "ACTIVE" for name, job in jobs.items() if name != "paused cleanup"
        )
        assert all(job.created_by == "import_beat" for job in jobs.values())

        # --- a second run: nothing doubled; a changed crontab updates its job ------------------------
        again = _import(url)
        assert again[-1] == "10 tasks: 0 created, 0 updated, 8 unchanged, 2 skipped"
        shell(MOVE)
        moved = _import(url)
        # The three tasks that share the crontab: the one-off's run moves to 03:30 too.
        assert moved[-1] == "10 tasks: 0 created, 3 updated, 5 unchanged, 2 skipped"
        assert "schedule" in _line(moved, "updated", "nightly report")
        assert Job.objects.get(pk=nightly.pk).schedule == "30 3 * * *"
        assert Job.objects.filter(tenant=tenant).count() == 8

        # --- --disable-source: beat stops firing what Tickwork now fires ----------------------------
        disabling = _import(url, "--disable-source")
        assert disabling[-1].startswith("disabled 8 imported tasks in beat's database; restart celery beat")
        source = shell(READ)
        assert source["enabled"] == {name: name in ("first monday", "sunrise") for name in source["enabled"]}
        assert source["last_update"] > filled["last_update"]

        # --- the jobs reach the team's Celery app -----------------------------------------------------
        live.worker()
        live.dispatcher()
        live.ready()
        assert api.post(f"/v1/jobs/{nightly.pk}/trigger").status_code == 200

        def delivered():
            lines = legacy.received()
            polls = [line for line in lines if line["name"] == "monitoring.tasks.poll"]
            reports = [line for line in lines if line["name"] == "reports.tasks.nightly"]
            return (polls, reports) if len(polls) >= 2 and reports else None

        polls, reports = wait_for(delivered, timeout=45, what="two polls and the triggered report")
        assert reports[0]["args"] == ["eu"] and reports[0]["kwargs"] == {"full": True}
        assert reports[0]["queue"] == legacy.queue
        assert all(line["executionId"] and line["executionId"] in line["taskId"] for line in polls + reports)
    finally:
        legacy.stop()
