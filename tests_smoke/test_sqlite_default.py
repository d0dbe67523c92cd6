"""The embedded default: with no DATABASE_URL, broker or Redis configured, the project migrates,
passes its checks, takes a job and dispatches a cron job's fire, on a SQLite file under
TICKWORK_VAR_DIR.

The tests not on PostgreSQL. It runs in subprocesses so the settings module is loaded afresh
from a clean environment, as a newcomer's first `manage.py` would load it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs inside the subprocess: bootstrap a tenant and token with the documented commands, then
# create a job through the API exactly as a client would.
CLIENT_SCRIPT = r"""
import io, json
import django
django.setup()
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient
from executions.models import Execution
from jobs.models import Job

call_command("create_tenant", "acme", stdout=io.StringIO())
out = io.StringIO()
call_command("create_token", "acme", stdout=out)
client = APIClient()
client.credentials(HTTP_AUTHORIZATION="Bearer " + out.getvalue().strip())
created = client.post(
    "/v1/jobs",
    {"name": "hello", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}, "payload": {"hi": 1}},
    format="json",
)
detail = client.get("/v1/jobs/" + created.json()["jobId"])
preview = client.get("/v1/schedule/preview", {"schedule": "0 * * * *", "count": 2})
health = client.get("/v1/health")
from django.contrib.auth import get_user_model
from django.test import Client
staff = Client()
staff.force_login(get_user_model().objects.create_superuser("admin", "admin@example.com", "pw"))
pages = {path: staff.get(path).status_code for path in ("/dashboard/", "/dashboard/jobs/", "/dashboard/executions/")}
print(json.dumps({
    "vendor": connection.vendor,
    "database": str(connection.settings_dict["NAME"]),
    "created": [created.status_code, created.json()],
    "detail": [detail.status_code, len(detail.json()["latestExecutions"])],
    "preview": preview.status_code,
    "health": [health.status_code, health.json()],
    "rows": [Job.objects.count(), Execution.objects.count()],
    "pages": pages,
}))
"""


# A cron job's first fire, due: the dispatcher claims it and makes the next fire (raw SQL reads
# ids and times back differently on SQLite; the dispatcher once missed every cron job there).
CRON_SCRIPT = r"""
import io, json
from datetime import timedelta
import django
django.setup()
from django.core.management import call_command
from django.utils import timezone
from dispatcher import dispatcher
from background.publisher import InMemoryPublisher
from executions.models import Execution
from jobs.models import Job
from scheduling.job_creation import job_create
from tenants.models import Tenant
from testing.steps import capacity

call_command("create_tenant", "acme", stdout=io.StringIO())
now = timezone.now()
capacity(now)  # a worker's slots to admit it to
fields = {"name": "every minute", "type": "CRON", "schedule": "* * * * *", "pool": "default", "handler": "noop"}
job = job_create(tenant=Tenant.objects.get(slug="acme"), fields=fields, now=now - timedelta(minutes=2)).job
publisher = InMemoryPublisher()
result = dispatcher.run_once(now=now, publisher=publisher)
fires = list(Execution.objects.filter(job=job).order_by("scheduled_for").values_list("scheduled_for", "state"))
print(json.dumps({
    "claimed": result.claimed,
    "materialised": result.materialised,
    "published": len(publisher.sent),
    "fires": [[at.isoformat(), state] for at, state in fires],
    "next_fire_at": Job.objects.get(pk=job.pk).next_fire_at.isoformat(),
    "now": now.isoformat(),
}))
"""


def run(args: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def embedded_env(var_dir: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_BROKER_WRITE_URL", "REDIS_URL"}
    }
    env.update(TICKWORK_VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="scheduler_project.settings")
    return env


def test_migrate_check_and_create_a_job_on_the_embedded_sqlite_default(tmp_path):
    """`migrate` and `check` succeed with nothing configured; a job created through the API is
    stored with its first execution in var/tickwork.sqlite3 (here: TICKWORK_VAR_DIR); health finds
    the database and the serverless broker, and (no dispatcher runs here) answers 503 naming the
    dispatcher; the dashboard's pages render for staff."""
    env = embedded_env(tmp_path)

    run(["manage.py", "migrate", "--noinput"], env)
    assert "no issues" in run(["manage.py", "check"], env)
    report = json.loads(run(["-c", CLIENT_SCRIPT], env).strip().splitlines()[-1])

    assert report["vendor"] == "sqlite"
    assert Path(report["database"]) == tmp_path / "tickwork.sqlite3"
    assert (tmp_path / "tickwork.sqlite3").is_file()
    status, job = report["created"]
    assert status == 201, job
    assert job["state"] == "ACTIVE" and job["nextFireAt"].endswith("Z")
    assert report["detail"] == [200, 1]
    assert report["preview"] == 200
    status, health = report["health"]
    assert status == 503 and (health["database"], health["broker"], health["status"]) == ("ok", "ok", "unavailable")
    assert health["dispatcher"].startswith("no dispatcher seen")
    assert report["rows"] == [1, 1]
    # The dashboard's pages render on SQLite too (its executions walk once used a UNION SQLite refuses).
    assert set(report["pages"].values()) == {200}, report["pages"]


def test_a_cron_fire_is_dispatched_and_the_next_one_made_on_the_embedded_sqlite_default(tmp_path):
    """On SQLite the dispatcher claims a cron job's due fire, publishes it and materialises the
    next fire, which is in the future and is the job's nextFireAt."""
    env = embedded_env(tmp_path)
    run(["manage.py", "migrate", "--noinput"], env)

    report = json.loads(run(["-c", CRON_SCRIPT], env).strip().splitlines()[-1])

    assert (report["claimed"], report["materialised"], report["published"]) == (1, 1, 1), report
    (first, first_state), (second, second_state) = report["fires"]
    assert (first_state, second_state) == ("QUEUED", "PENDING")
    assert first <= report["now"] < second == report["next_fire_at"]
