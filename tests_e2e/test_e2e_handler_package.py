"""A team's handler package, installed with pip into a fresh virtualenv beside Tickwork, runs on
real workers: enabled once through TICKWORK_APPS and once only through its `tickwork.apps`
entry point (README, "Your own handlers"; examples/handlers-package/).

Everything runs in the new virtualenv's processes, on a database of the test's own: on the
PostgreSQL run a scratch database with a Redis broker, on the embedded run a SQLite file and
the filesystem broker. The virtualenv gets Tickwork's requirements from the project's own
environment (a .pth file), so the test installs only the package, with no download.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from testing.harness import ROOT, database_url, wait_for

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "examples" / "handlers-package"

# Run in the virtualenv (manage.py shell): a tenant and its token, then three jobs and one
# refused, through the API as a client would submit them.
SUBMIT = r"""
import json
from datetime import UTC, datetime
from rest_framework.test import APIClient
from tenants.services import tenant_create, token_create

tenant = tenant_create(slug=SLUG)
_, raw = token_create(tenant=tenant)
client = APIClient()
client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
now = datetime.now(UTC).isoformat()

def submit(name, handler, payload, **extra):
    body = {"name": name, "type": "ONCE", "runAt": now, "target": {"handler": handler}, "payload": payload, **extra}
    return client.post("/v1/jobs", body, format="json")

refused = submit("bad greeting", "myco.greet", {"nmae": "Ada"})
jobs = {
    "greet": submit("greet", "myco.greet", {"name": "Ada", "language": "fr"}).json()["jobId"],
    "charge": submit("charge", "myco.charge", {"customer": "c-42", "amountCents": 1999}).json()["jobId"],
    "count": submit(
        "count", "myco.count", {"upTo": 5, "failFirstAttemptAt": 3},
        retryPolicy={"maxAttempts": 3, "initialDelayMs": 100, "backoff": "FIXED"},
    ).json()["jobId"],
}
print(json.dumps({"refused": [refused.status_code, refused.json()], "jobs": jobs}))
"""

# Run in the virtualenv: each job's latest execution, and the charges the atomic handler wrote.
OUTCOMES = r"""
import json
from executions.models import Execution
from myco_handlers.models import Charge

out = {}
for name, job_id in JOBS.items():
    e = Execution.objects.filter(job_id=job_id).order_by("-attempt").first()
    out[name] = {"state": e.state, "attempt": e.attempt, "result": e.result, "id": str(e.pk)}
out["charges"] = [[str(c.execution_id), c.customer, c.amount_cents] for c in Charge.objects.all()]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with the example package pip-installed, and Tickwork's requirements
    reached through a .pth file pointing at the project's environment (pip and the build's
    setuptools too: the virtualenv has none of its own to shadow them)."""
    where = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "tickwork-requirements.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # A copy to install from: setuptools builds in the source folder (build/, *.egg-info).
    source = shutil.copytree(EXAMPLE, tmp_path_factory.mktemp("source") / "handlers-package")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(source),
        ],
        check=True,
    )
    return python


@pytest.fixture
def scratch(tmp_path):
    """A database and broker of this test's own, as the roles' environment: a scratch database
    on the PostgreSQL run (dropped at the end), a SQLite file on the embedded one."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TICKWORK_", "CELERY_", "DJANGO_", "DATABASE_"))
        and key not in ("REDIS_URL", "PYTHONPATH")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        TICKWORK_VAR_DIR=str(tmp_path / "var"),
        TICKWORK_LEASE_SECONDS="3",
        TICKWORK_POLL_SECONDS="0.2",
        TICKWORK_WORKER_BEAT_SECONDS="0.5",
        PYTHONUNBUFFERED="1",
    )
    # This test has no database access of its own; a connection an earlier test of this process
    # left open would have wait_for's check of old connections reach for it, and fail.
    connection.close()
    if connection.vendor != "postgresql":
        yield env
        return
    import psycopg
    import redis

    name = f"tickwork_pkg_{uuid.uuid4().hex[:8]}"
    admin_url = database_url().rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    broker = f"redis://127.0.0.1:6379/{int(os.environ.get('TICKWORK_TEST_REDIS_DB', '3'))}"
    redis.Redis.from_url(broker).flushdb()
    env.update(DATABASE_URL=admin_url.rsplit("/", 1)[0] + f"/{name}", CELERY_BROKER_URL=broker)
    try:
        yield env
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _manage(python: Path, env: dict, *args: str) -> str:
    run = subprocess.run(
        [str(python), "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, f"manage.py {' '.join(args)} exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    return run.stdout


def _shell(python: Path, env: dict, code: str) -> dict:
    return json.loads(_manage(python, env, "shell", "-c", code).strip().splitlines()[-1])


def _start(python: Path, env: dict, argv: list[str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(python), *argv], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, 15)
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


def _scenario(python: Path, env: dict, tmp_path: Path, slug: str) -> None:
    submitted = _shell(python, env, f"SLUG = {slug!r}\n" + SUBMIT)
    status, body = submitted["refused"]
    assert (status, body["code"], body["payload"]) == (400, "invalid", {"nmae": ["unknown field"]})
    worker = _start(
        python,
        env,
        [
            "-m",
            "celery",
            "-A",
            "scheduler_project",
            "worker",
            "-Q",
            "tickwork.default",
            "-c",
            "2",
            "-l",
            "INFO",
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
        ],
        tmp_path / f"{slug}-worker.log",
    )
    dispatcher = _start(python, env, ["manage.py", "run_dispatcher"], tmp_path / f"{slug}-dispatcher.log")
    try:
        jobs = f"JOBS = {submitted['jobs']!r}\n"

        def settled() -> dict | None:
            for process in (worker, dispatcher):
                assert process.poll() is None, (tmp_path / f"{slug}-worker.log").read_text()[-3000:]
            out = _shell(python, env, jobs + OUTCOMES)
            return out if all(out[name]["state"] == "SUCCEEDED" for name in submitted["jobs"]) else None

        try:
            out = wait_for(settled, timeout=90, interval=1.0, what="the package's three jobs to succeed")
        except AssertionError:
            logs = "\n".join(p.read_text()[-3000:] for p in sorted(tmp_path.glob(f"{slug}-*.log")))
            raise AssertionError(f"{_shell(python, env, jobs + OUTCOMES)}\n{logs}") from None
    finally:
        _stop([worker, dispatcher])
    assert out["greet"]["result"] == {"message": "bonjour, Ada"}
    # The atomic handler's row committed with its success: one charge, keyed by that execution.
    assert [out["charge"]["id"], "c-42", 1999] in out["charges"]
    assert out["charge"]["result"] == {"chargeId": pytest.approx(out["charge"]["result"]["chargeId"])}
    # The first attempt failed after step 3 had been saved; the retry resumed after it.
    assert out["count"]["attempt"] == 2
    assert out["count"]["result"] == {"counted": 5, "resumedAfter": 3}


def test_handler_package_runs_on_real_workers_enabled_either_way(venv, scratch, tmp_path):
    """The package's three handlers run to SUCCEEDED on a real worker and dispatcher of the new
    virtualenv: first named by TICKWORK_APPS with entry points off, then found by its entry
    point alone. `migrate` creates the package's own table."""
    by_setting = {**scratch, "TICKWORK_APPS": "myco_handlers", "TICKWORK_APP_ENTRY_POINTS": "0"}
    migrated = _manage(venv, by_setting, "migrate", "--no-input")
    assert "myco_handlers.0001_initial" in migrated or "Applying myco_handlers" in migrated, migrated
    _scenario(venv, by_setting, tmp_path, "by-setting")
    _scenario(venv, scratch, tmp_path, "by-entry-point")


def test_without_the_package_its_handlers_are_unknown(venv, scratch):
    """With entry points off and no TICKWORK_APPS, the installed package is not loaded: the
    control for the test above (its handlers are not Tickwork's own)."""
    env = {**scratch, "TICKWORK_APP_ENTRY_POINTS": "0"}
    names = _manage(venv, env, "shell", "-c", "from jobs import registry; print(registry.handler_names())")
    assert "myco." not in names and "noop" in names


# --- An app that fails to load ------------------------------------------------------------------

ROLES = {
    "dispatcher": [sys.executable, "manage.py", "run_dispatcher"],
    "sweeper": [sys.executable, "manage.py", "run_sweeper"],
    "alerter": [sys.executable, "manage.py", "run_alerter"],
    "standalone": [sys.executable, "manage.py", "run_standalone", "--port", "0"],
    "migrate": [sys.executable, "manage.py", "migrate"],
    "worker": [sys.executable, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", "tickwork.default"],
    "web (daphne)": [sys.executable, "-m", "daphne", "-p", "0", "scheduler_project.asgi:application"],
    "web (gunicorn)": [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        "scheduler_project/gunicorn.conf.py",
        "-b",
        "127.0.0.1:0",
        "scheduler_project.wsgi",
    ],
}

BROKEN = {
    # A module that is not installed (a typo in TICKWORK_APPS).
    "missing": ("myco_misspelt", {}, "ModuleNotFoundError: No module named 'myco_misspelt'"),
    # An app whose handlers.py needs a library the environment lacks.
    "handlers": (
        "broken_handlers",
        {"__init__.py": "", "handlers.py": "import stripe_sdk_not_installed\n"},
        "ModuleNotFoundError: No module named 'stripe_sdk_not_installed'",
    ),
    # An app that takes a built-in handler's name: whichever loaded last would run.
    "duplicate": (
        "greedy_app",
        {
            "__init__.py": "",
            "handlers.py": "from tickwork import register\n\n@register('http')\ndef http(ctx):\n    return None\n",
        },
        "ValueError: handler 'http' is registered twice",
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_an_app_that_fails_to_load_stops_every_role_with_one_line(kind, tmp_path):
    """Each role exits at once with status 2 and one line on stderr naming the app and the error:
    no traceback, and no role left running without the app's handlers."""
    app, files, error = BROKEN[kind]
    for name, text in files.items():
        (tmp_path / "apps" / app).mkdir(parents=True, exist_ok=True)
        (tmp_path / "apps" / app / name).write_text(text)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TICKWORK_", "DJANGO_"))}
    env.update(
        TICKWORK_APPS=app,
        TICKWORK_VAR_DIR=str(tmp_path / "var"),
        PYTHONPATH=str(tmp_path / "apps"),
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
    )
    started = {
        role: subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        for role, argv in ROLES.items()
    }
    deadline = time.monotonic() + 60
    failures = []
    for role, process in started.items():
        try:
            out, err = process.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            failures.append(f"{role}: still running")
            continue
        # The one line, and no traceback (gunicorn's own log lines of its start may come before it).
        ours = [line for line in err.splitlines() if line.startswith("tickwork: ")]
        expected = f"tickwork: the app '{app}' failed to load: {error}"
        if process.returncode != 2 or len(ours) != 1 or not ours[0].startswith(expected) or "Traceback" in err:
            failures.append(f"{role}: exit {process.returncode}, stderr:\n{err[-2000:]}\nstdout:\n{out[-500:]}")
    assert not failures, "\n\n".join(failures)
