"""The dashboard in a real browser against the real processes: daphne (ASGI, WebSockets), a
dispatcher and a Celery worker, all on pytest-django's test database, with Redis DB 7 as the
broker (and, in "redis" mode, as the channel layer).

Needs Debian's Chromium (/usr/bin/chromium) and a Redis on 127.0.0.1:6379. Screenshots of every
page at 1280x800 and 390 px wide go to test-artifacts/screenshots/, the processes' logs to
test-artifacts/logs/.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from testing.harness import TEST_HANDLERS, database_url

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make between
# browser steps are plain blocking calls all the same.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

ROOT = Path(settings.BASE_DIR)
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
LOGS = ARTIFACTS / "logs"
CHROMIUM = "/usr/bin/chromium"
REDIS = os.environ.get("TICKWORK_TEST_REDIS", "redis://127.0.0.1:6379/7")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 390, "height": 844}
PASSWORD = "correct horse battery staple"

if not Path(CHROMIUM).exists():  # pragma: no cover - the CI script installs it
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)


# --- The processes ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _flush_redis() -> None:
    """Drop what an earlier run left in the broker's database (stale tasks, bindings)."""
    import redis

    redis.Redis.from_url(REDIS).flushdb()


class Stack:
    """daphne + dispatcher + worker as subprocesses; stopped by their pids in `stop`."""

    def __init__(self, mode: str, tmp: Path) -> None:
        self.mode = mode
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": REDIS,
            "TICKWORK_VAR_DIR": str(tmp),
            # A short lease: heartbeats every second, so a cancel reaches the handler quickly.
            "TICKWORK_LEASE_SECONDS": "3",
            "TICKWORK_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "scheduler_project.settings",
        }
        self.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        if mode == "redis":
            self.env["REDIS_URL"] = REDIS
        else:  # the embedded default: no layer crosses processes, the feed's poll carries updates
            self.env.pop("REDIS_URL", None)
        self.processes: dict[str, subprocess.Popen] = {}
        LOGS.mkdir(parents=True, exist_ok=True)

    def _start(self, name: str, argv: list[str]) -> None:
        log = open(LOGS / f"{self.mode}-{name}.log", "w")
        self.processes[name] = subprocess.Popen(
            argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def start(self) -> "Stack":
        _flush_redis()
        python = sys.executable
        self._start(
            "web",
            [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "scheduler_project.asgi:application"],
        )
        self._start("dispatcher", [python, "manage.py", "run_dispatcher"])
        self._start(
            "worker",
            [
                python,
                "-m",
                "celery",
                "-A",
                "scheduler_project",
                "worker",
                "-Q",
                "tickwork.default",
                "-c",
                "2",
                "--without-gossip",
                "--without-mingle",
                # The handlers that exist only for tests (one that logs as it runs).
                "--include",
                TEST_HANDLERS,
                "-l",
                "INFO",
            ],
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited: {(LOGS / f'{self.mode}-{name}.log').read_text()[-3000:]}")
            worker_ready = "ready." in (LOGS / f"{self.mode}-worker.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    web_ready = True
            except OSError:
                web_ready = False
            if worker_ready and web_ready:
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("the stack did not start within 60 s; see test-artifacts/logs/")

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture(scope="module")
def stack(django_db_setup, django_db_blocker, tmp_path_factory):
    """The processes in production shape: Redis as broker and channel layer."""
    running = Stack("redis", tmp_path_factory.mktemp("var-redis")).start()
    yield running
    running.stop()


@pytest.fixture
def embedded_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    """The processes without REDIS_URL: the in-memory channel layer reaches no other process, so
    live updates ride on the feed's poll alone. Started and stopped around its one test (which
    runs first, so the two stacks' workers never share the broker)."""
    running = Stack("embedded", tmp_path_factory.mktemp("var-embedded")).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


@pytest.fixture(scope="module", autouse=True)
def _screenshot_dir():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)


# --- Helpers -----------------------------------------------------------------------------------------------


def _page(browser, stack, username: str, viewport=WIDE):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"{stack.base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{stack.base}/dashboard/")
    return page


def _shoot(page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _wait_live(page) -> None:
    page.wait_for_selector("[data-live-status=live]")


def _wait_for(predicate, timeout: float = 20.0, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {message}")


def _user(username: str, *, staff: bool = False, tenants=()):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username, password=PASSWORD, is_staff=staff)
    for tenant in tenants:
        tenant.members.add(user)
    return user


def _job(tenant, **fields):
    from executions.scheduling import job_create

    now = timezone.now()
    fields.setdefault("type", "ONCE")
    fields.setdefault("run_at", now)
    fields.setdefault("pool", "default")
    fields.setdefault("handler", "noop")
    fields.setdefault("name", f"{fields['handler']} job")
    return job_create(tenant=tenant, fields=fields, now=now).job


def _execution(job):
    from executions.models import Execution

    return Execution.objects.filter(job=job).order_by("-created_at").first()


# A MutationObserver that records every state the badge of one execution shows, with when.
_WATCH = """
(executionId) => {
  window.__seen = [];
  const record = () => {
    const badge = document.querySelector(`[data-exec="${executionId}"]`);
    const state = badge && badge.getAttribute("data-state");
    const last = window.__seen[window.__seen.length - 1];
    if (state && (!last || last.state !== state)) window.__seen.push({state, at: Date.now()});
  };
  new MutationObserver(record).observe(document.body, {subtree: true, childList: true, attributes: true});
  record();
}
"""


# --- Tests ----------------------------------------------------------------------------------------------


def test_live_updates_without_redis(embedded_stack, browser, transactional_db):
    """The embedded default (no REDIS_URL): a job created on the page is seen going PENDING →
    RUNNING → SUCCEEDED live, each state within a second, without a reload."""
    _create_and_watch(embedded_stack, browser)


def test_a_job_created_on_the_page_goes_pending_running_succeeded_live(stack, browser, transactional_db):
    """With Redis: create a 2-second `sleep` job through the form; its page then shows PENDING,
    RUNNING and SUCCEEDED as they happen, each within a second of the commit, with no reload."""
    _create_and_watch(stack, browser)


def _create_and_watch(stack, browser) -> None:
    from jobs.models import Job
    from tenants.services import tenant_create

    tenant = tenant_create(slug="acme")
    _user("ada", tenants=[tenant])
    page = _page(browser, stack, "ada")

    page.goto(f"{stack.base}/dashboard/jobs/new")
    page.fill("input[name=name]", "live sleep")
    page.select_option("select[name=type]", "ONCE")
    run_at = (datetime.now(UTC) + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    page.fill("input[name=runAt]", run_at)
    page.select_option("select[name=handler]", "sleep")
    page.fill("textarea[name=payload]", '{"seconds": 2}')
    if stack.mode == "redis":
        _shoot(page, "job-create-wide")
    page.click("[data-testid=submit-job]")
    page.wait_for_url("**/dashboard/jobs/*/")

    job = Job.objects.get(name="live sleep")
    execution = _execution(job)
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    page.evaluate("window.__sameDocument = true")
    _wait_live(page)
    page.evaluate(_WATCH, str(execution.pk))

    page.wait_for_selector(
        f'[data-testid=job-executions] [data-exec="{execution.pk}"][data-state=SUCCEEDED]', timeout=20_000
    )
    if stack.mode == "redis":
        _shoot(page, "job-detail-succeeded-wide")
    seen = page.evaluate("window.__seen")
    states = [s["state"] for s in seen]

    assert page.evaluate("window.__sameDocument") is True
    assert navigations == []
    assert states[0] == "PENDING"
    assert states.index("RUNNING") < states.index("SUCCEEDED")
    execution.refresh_from_db()
    for state, committed in (("RUNNING", execution.started_at), ("SUCCEEDED", execution.finished_at)):
        shown = next(s["at"] for s in seen if s["state"] == state) / 1000
        latency = shown - committed.timestamp()
        print(f"[{stack.mode}] {state} shown {latency * 1000:.0f} ms after its commit")
        assert latency < 1.0, f"{state} took {latency:.2f} s to show"
    # The region refresh brought the rest of the page along: the job is now COMPLETED.
    page.wait_for_selector("#job-summary .badge:has-text('COMPLETED')")


def test_cancelling_a_running_sleep_job_from_its_page(stack, browser, transactional_db):
    """Cancel on a RUNNING execution records the request; the worker stops the handler at its
    next heartbeat and the page shows CANCELLED without a reload."""
    from dashboard.models import AuditEntry
    from tenants.services import tenant_create

    tenant = tenant_create(slug="acme")
    _user("ada", tenants=[tenant])
    job = _job(tenant, name="long sleep", handler="sleep", payload={"seconds": 60})
    execution = _execution(job)
    page = _page(browser, stack, "ada")
    page.goto(f"{stack.base}/dashboard/jobs/{job.pk}/")
    _wait_live(page)
    page.wait_for_selector(f'[data-exec="{execution.pk}"][data-state=RUNNING]')
    _shoot(page, "job-detail-running-wide")

    page.click(f'tr[data-execution="{execution.pk}"] [data-action=cancel]')
    page.wait_for_selector(".message-success")
    page.evaluate("window.__sameDocument = true")
    page.wait_for_selector(f'[data-exec="{execution.pk}"][data-state=CANCELLED]', timeout=20_000)

    assert page.evaluate("window.__sameDocument") is True
    execution.refresh_from_db()
    assert execution.state == "CANCELLED"
    assert execution.finished_at - execution.cancel_requested_at < timedelta(seconds=5)
    entry = AuditEntry.objects.get(action="execution.cancel")
    assert (entry.actor, entry.outcome, entry.target_id) == ("ada", "OK", str(execution.pk))


def test_retrying_a_dead_execution_from_the_dead_letter_view(stack, browser, transactional_db):
    """A `fail` job with one attempt goes DEAD; "Retry selected" re-drives it and its second
    attempt (failTimes: 1) succeeds. A new dead execution appears in the open view live."""
    from dashboard.models import AuditEntry
    from executions.models import Execution
    from tenants.services import tenant_create

    tenant = tenant_create(slug="acme")
    _user("olivia", staff=True)
    job = _job(tenant, name="flaky upstream", handler="fail", payload={"failTimes": 1}, max_attempts=1)
    execution = _execution(job)
    _wait_for(lambda: Execution.objects.get(pk=execution.pk).state == "DEAD", message="the execution to die")

    page = _page(browser, stack, "olivia")
    page.goto(f"{stack.base}/dashboard/executions/?state=DEAD")
    _wait_live(page)
    _shoot(page, "dead-letter-before-retry-wide")
    page.check(f'input[name=ids][value="{execution.pk}"]')
    page.click("[data-testid=retry-selected]")
    page.wait_for_selector(".message-success:has-text('Re-driven 1 execution')")
    assert page.locator(f'tr[data-execution="{execution.pk}"]').count() == 0
    _wait_for(lambda: Execution.objects.get(pk=execution.pk).state == "SUCCEEDED", message="the retry to succeed")
    execution.refresh_from_db()
    assert execution.attempt == 2
    entry = AuditEntry.objects.get(action="execution.retry")
    assert (entry.actor, entry.outcome, entry.target_id) == ("olivia", "OK", str(execution.pk))

    # Still on the same document: a new dead execution shows up without a reload.
    page.evaluate("window.__sameDocument = true")
    another = _execution(_job(tenant, name="broken webhook", handler="fail", max_attempts=1))
    page.wait_for_selector(f'tr[data-execution="{another.pk}"] [data-state=DEAD]', timeout=20_000)
    assert page.evaluate("window.__sameDocument") is True

    page.goto(f"{stack.base}/dashboard/executions/{execution.pk}/")
    assert page.get_attribute("[data-testid=execution-state] [data-exec]", "data-state") == "SUCCEEDED"
    assert "execution.retry" in page.inner_text("#execution-main")


def test_a_tenant_user_cannot_see_another_tenants_jobs(stack, browser, transactional_db):
    """Lists show the member's own tenant only; another tenant's job and execution pages answer
    404 even by direct URL."""
    from tenants.services import tenant_create

    acme, globex = tenant_create(slug="acme"), tenant_create(slug="globex")
    _user("ada", tenants=[acme])
    mine = _job(acme, name="acme nightly", run_at=timezone.now() + timedelta(hours=1))
    theirs = _job(globex, name="globex payroll", run_at=timezone.now() + timedelta(hours=1))
    page = _page(browser, stack, "ada")

    page.goto(f"{stack.base}/dashboard/jobs/")
    table = page.inner_text("[data-testid=jobs-table]")
    assert "acme nightly" in table and "globex payroll" not in table
    page.goto(f"{stack.base}/dashboard/executions/")
    assert "globex payroll" not in page.inner_text("[data-testid=executions-table]")

    for path in (f"/dashboard/jobs/{theirs.pk}/", f"/dashboard/executions/{_execution(theirs).pk}/"):
        response = page.goto(f"{stack.base}{path}")
        assert response.status == 404, path
    assert page.goto(f"{stack.base}/dashboard/jobs/{mine.pk}/").status == 200


# Records each state the graph's node of one step shows, with when (the region is swapped whole).
_WATCH_STEP = """
(step) => {
  window.__steps = window.__steps || {};
  const seen = window.__steps[step] = [];
  const record = () => {
    const node = document.querySelector(`[data-testid=run-graph] [data-step="${step}"]`);
    const state = node && node.getAttribute("data-state");
    const last = seen[seen.length - 1];
    if (state && (!last || last.state !== state)) seen.push({state, at: Date.now()});
  };
  new MutationObserver(record).observe(document.body, {subtree: true, childList: true, attributes: true});
  record();
}
"""


def test_a_runs_graph_follows_its_steps_live(stack, browser, transactional_db, drive, settings):
    """The run page of a diamond A→B, A→C, B+C→D: when A succeeds (driven here, through the
    named transitions; the steps' pool has no worker, so the stack's dispatcher admits none of
    them), A's node turns SUCCEEDED and B's and C's PENDING within a second, with no reload; the
    page never scrolls sideways, wide or narrow."""
    from executions import runs
    from jobs.models import Job
    from tenants.services import tenant_create

    # The steps move in this process: tell the web over Redis, as a worker's moves do.
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS], "prefix": "tickwork"},
        }
    }
    acme = tenant_create(slug="acme")
    _user("ada", tenants=[acme])
    job = Job.objects.create(
        tenant=acme,
        name="nightly etl",
        type="ONCE",
        run_at=timezone.now() + timedelta(days=1),
        pool="",
        handler="",
        workflow={
            "steps": [
                {"name": name, "target": {"pool": "etl", "handler": "noop"}, "payload": {}, "dependsOn": ups}
                for name, ups in (
                    ("extract", []),
                    ("clean", ["extract"]),
                    ("enrich", ["extract"]),
                    ("load", ["clean", "enrich"]),
                )
            ]
        },
    )
    fired = runs.fire(job=job, scheduled_for=job.run_at, now=timezone.now())
    steps = {e.step: e for e in fired.executions}
    page = _page(browser, stack, "ada")
    page.goto(f"{stack.base}/dashboard/runs/{fired.run_id}/")
    _wait_live(page)
    page.evaluate("window.__sameDocument = true")
    for name in steps:
        page.evaluate(_WATCH_STEP, name)
    _shoot(page, "run-detail-blocked-wide")

    done = drive(steps["extract"], "SUCCEEDED")
    for name in ("clean", "enrich"):
        page.wait_for_selector(f'[data-testid=run-graph] [data-step="{name}"][data-state=PENDING]', timeout=5_000)
    shown = page.evaluate("window.__steps")
    _shoot(page, "run-detail-running-wide")

    assert page.evaluate("window.__sameDocument") is True
    assert [s["state"] for s in shown["extract"]][-1] == "SUCCEEDED"
    assert [s["state"] for s in shown["clean"]] == ["BLOCKED", "PENDING"]
    assert [s["state"] for s in shown["load"]] == ["BLOCKED"]
    latency = shown["clean"][-1]["at"] / 1000 - done.finished_at.timestamp()
    print(f"[{stack.mode}] a released step shown {latency * 1000:.0f} ms after its commit")
    assert latency < 1.0, f"the release took {latency:.2f} s to show"
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    narrow = _page(browser, stack, "ada", viewport=NARROW)
    narrow.goto(f"{stack.base}/dashboard/runs/{fired.run_id}/")
    _shoot(narrow, "run-detail-narrow")
    assert narrow.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    narrow.context.close()
    page.goto(f"{stack.base}/dashboard/jobs/{job.pk}/")
    assert page.inner_text("[data-testid=job-runs]").count("RUNNING") == 1
    _shoot(page, "job-detail-workflow-wide")
    page.context.close()


def test_an_executions_logs_show_on_its_page_while_it_runs(stack, browser, transactional_db):
    """A `test-logs` job logs a pair of lines (ctx.log and logging) every 2 s: its page shows the
    first pair while the run is still RUNNING, without a reload, and all six lines once it has
    SUCCEEDED."""
    from executions.models import Execution
    from tenants.services import tenant_create

    tenant = tenant_create(slug="acme")
    _user("ada", tenants=[tenant])
    execution = _execution(_job(tenant, name="chatty", handler="test-logs", payload={"lines": 3, "seconds": 2}))
    page = _page(browser, stack, "ada")
    page.goto(f"{stack.base}/dashboard/executions/{execution.pk}/")
    _wait_live(page)
    page.evaluate("window.__sameDocument = true")

    page.wait_for_selector(".log-line:has-text('attempt 1: line 1 by logging')", timeout=20_000)
    assert Execution.objects.get(pk=execution.pk).state == "RUNNING"
    assert page.locator(".log-line:has-text('line 3')").count() == 0
    assert page.locator("[data-testid=logs-live]").count() == 1
    _shoot(page, "execution-logs-running-wide")
    page.wait_for_selector(f'[data-testid=execution-state] [data-exec="{execution.pk}"][data-state=SUCCEEDED]')
    page.wait_for_selector(".log-line:has-text('attempt 1: line 3 by logging')", timeout=5_000)

    shown = page.locator("[data-testid=log-lines] .log-line").all_inner_texts()
    assert [line.split(" ", 4)[-1] for line in shown] == [
        f"attempt 1: line {n} by {how}" for n in (1, 2, 3) for how in ("ctx.log", "logging")
    ]
    assert page.locator("[data-testid=logs-live]").count() == 0
    assert page.evaluate("window.__sameDocument") is True
    _shoot(page, "execution-logs-succeeded-wide")
    page.context.close()


def test_every_page_at_1280_and_390_wide(stack, browser, transactional_db):
    """Screenshots of each page at both sizes; at 390 px the document never scrolls sideways
    (wide tables scroll inside their own box) and no script error is logged."""
    from executions.models import Execution
    from tenants.services import tenant_create

    acme, globex = tenant_create(slug="acme"), tenant_create(slug="globex")
    _user("olivia", staff=True)
    for i in range(4):
        _job(acme, name=f"report-{i}", handler="noop", payload={"i": i})
    dead_job = _job(globex, name="flaky-sync", handler="fail", payload={"message": "upstream 503"}, max_attempts=1)
    cron = _job(
        acme, name="billing-rollup", type="CRON", schedule="*/5 * * * *", timezone="America/New_York", run_at=None
    )
    _job(acme, name="long-import", handler="sleep", payload={"seconds": 30})
    dead = _execution(dead_job)
    _wait_for(lambda: Execution.objects.get(pk=dead.pk).state == "DEAD", message="the execution to die")
    pages = {
        "overview": "/dashboard/",
        "jobs": "/dashboard/jobs/",
        "job-create": "/dashboard/jobs/new",
        "job-detail": f"/dashboard/jobs/{cron.pk}/",
        "job-edit": f"/dashboard/jobs/{cron.pk}/edit",
        "executions": "/dashboard/executions/",
        "dead-letter": "/dashboard/executions/?state=DEAD",
        "execution-detail": f"/dashboard/executions/{dead.pk}/",
        "audit": "/dashboard/audit/",
    }
    for label, viewport in (("wide", WIDE), ("narrow", NARROW)):
        page = _page(browser, stack, "olivia", viewport=viewport)
        errors = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        page.on(
            "console",
            lambda msg, errors=errors: errors.append(msg.text) if msg.type == "error" else None,
        )
        if label == "wide":  # something for the audit log to show
            page.goto(f"{stack.base}/dashboard/jobs/{cron.pk}/")
            page.click("[data-action=pause]")
            page.wait_for_selector(".message-success")
            page.click("[data-action=resume]")
            page.wait_for_selector(".message-success")
        for name, path in pages.items():
            response = page.goto(f"{stack.base}{path}")
            assert response.status == 200, path
            _wait_live(page)
            page.wait_for_timeout(300)
            _shoot(page, f"{name}-{label}")
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} scrolls sideways by {overflow}px at {viewport['width']}px"
        page.context.close()
        assert errors == [], errors
    login = browser.new_page(viewport=NARROW)
    login.goto(f"{stack.base}/accounts/login/")
    _shoot(login, "login-narrow")
    login.close()
    print(json.dumps({"screenshots": sorted(p.name for p in SCREENSHOTS.glob("*.png"))}))
