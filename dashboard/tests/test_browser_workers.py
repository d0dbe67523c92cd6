"""The Workers page, a pool's pause and the overview's chart range in a real browser (Debian's
Chromium) against the real processes as dashboard/tests/test_browser.py starts them (daphne, a
dispatcher, a Celery worker), with the worker registry's offline bound at 4 s.

In file order: the range picker on the overview; a pool paused and resumed from the Workers page
(its due work waits while paused and runs after); then the worker is killed (SIGKILL, no clean
stop) and the open page flags it offline without a reload, within the bound and one poll.
Screenshots at 1280x800 and 390x844 go to test-artifacts/screenshots/."""

import os
import signal
import socket
from datetime import timedelta

import pytest

from dashboard.tests.test_browser import NARROW, SCREENSHOTS, Stack, _job, _page, _user, _wait_for
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
OFFLINE_SECONDS = 4


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


@pytest.fixture(scope="module")
def fleet_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    os.environ["TICKWORK_WORKER_OFFLINE_SECONDS"] = str(OFFLINE_SECONDS)
    try:
        running = Stack("redis", tmp_path_factory.mktemp("var-fleet")).start()
    finally:
        del os.environ["TICKWORK_WORKER_OFFLINE_SECONDS"]
    yield running
    running.stop()


def _shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_the_overview_charts_change_range_from_the_picker(fleet_stack, browser, transactional_db):
    """Clicking "7 d" reloads the overview with ?range=7d (a link to share), the charts drawn from
    the pools' minute samples, the queue depth per pool among them."""
    from executions.clock import db_now
    from pools.models import PoolSample
    from tenants.services import tenant_create

    tenant = tenant_create(slug="acme")
    _user("olivia", staff=True)
    now = db_now().replace(second=0, microsecond=0)
    PoolSample.objects.bulk_create(
        PoolSample(
            at=now - timedelta(minutes=30 * i),
            pool="default",
            tenant=owner,
            due=(i * 7) % 40,
            queued=2,
            running=i % 5,
            succeeded=10 + i % 9,
            failed=i % 3,
            started=12,
            lag_p50_ms=40 + i % 20,
            lag_p99_ms=300 + (i * 13) % 400,
        )
        for i in range(1, 300)
        for owner in (tenant, None)  # the tenant's rows and the pool's totals, as the sweeper writes them
    )
    page = _page(browser, fleet_stack, "olivia")
    page.click("[data-testid=range-picker] a[data-range='7d']")
    page.wait_for_url("**/dashboard/?range=7d")
    assert page.get_attribute("[data-range='7d']", "aria-current") == "true"
    assert page.locator("[data-testid=chart-due] svg path").count() == 1  # one pool: one line
    assert page.locator("[data-testid=chart-throughput] svg rect").count() > 84
    assert "Over the last 7 d" in page.inner_text("#overview-charts")
    _shoot(page, "overview-range-7d-wide")

    narrow = _page(browser, fleet_stack, "olivia", viewport=NARROW)
    narrow.goto(f"{fleet_stack.base}/dashboard/?range=24h")
    assert narrow.locator("[data-testid=range-picker] a[data-range='1h']").is_visible()
    assert narrow.locator("[data-testid=chart-due] svg").count() == 1
    _shoot(narrow, "overview-range-24h-narrow")
    narrow.context.close()
    page.context.close()


def test_a_pool_paused_from_the_workers_page_admits_nothing_until_resumed(fleet_stack, browser, transactional_db):
    from dashboard.models import AuditEntry
    from executions.models import Execution
    from tenants.services import tenant_create

    tenant = tenant_create(slug="acme")
    _user("olivia", staff=True)
    page = _page(browser, fleet_stack, "olivia")
    page.click("nav a:has-text('Workers')")
    page.wait_for_url("**/dashboard/workers/")
    page.fill("[data-testid=pool-row-default] input[name=reason]", "database failover")
    page.click("[data-testid=pool-pause-default]")  # the confirm is accepted (_page's dialog handler)
    page.wait_for_selector(".message-success:has-text('Pool default paused.')")
    assert "database failover" in page.inner_text("[data-testid=pool-row-default]")
    _shoot(page, "workers-pool-paused-wide")

    job = _job(tenant, name="paused pool's work")
    execution = Execution.objects.get(job=job)
    page.goto(f"{fleet_stack.base}/dashboard/executions/{execution.pk}/")
    page.wait_for_selector("text=pool default is paused")
    with pytest.raises(AssertionError):  # three seconds of dispatcher looks admit nothing
        _wait_for(lambda: Execution.objects.get(pk=execution.pk).state != "PENDING", timeout=3)

    narrow = _page(browser, fleet_stack, "olivia", viewport=NARROW)
    narrow.goto(f"{fleet_stack.base}/dashboard/workers/")
    resume = narrow.locator("[data-testid=pool-resume-default]")
    resume.scroll_into_view_if_needed()
    assert resume.is_visible()
    box = resume.bounding_box()
    assert box is not None and box["x"] + box["width"] <= NARROW["width"]  # on screen, not past a scroll
    _shoot(narrow, "workers-pool-paused-narrow")
    resume.click()
    narrow.wait_for_selector(".message-success:has-text('Pool default resumed.')")
    narrow.context.close()

    _wait_for(lambda: Execution.objects.get(pk=execution.pk).state == "SUCCEEDED", message="the resumed pool's run")
    actions = list(AuditEntry.objects.order_by("at", "id").values_list("actor", "action", "target_id", "outcome"))
    assert actions == [("olivia", "pool.pause", "default", "OK"), ("olivia", "pool.resume", "default", "OK")]
    page.context.close()


def test_a_killed_worker_is_flagged_offline_on_the_open_page(fleet_stack, browser, transactional_db):
    """The worker shows live with its pool and slots, and the run it just did (by one of its
    pool's processes, "host:child pid") counted as its own; SIGKILL (no clean stop, so no
    deregister) and the open page, which reads its table again every 2 s, flags it offline
    within the registry's bound (4 s here) and a poll: no reload."""
    from executions.models import Execution
    from tenants.services import tenant_create

    _user("olivia", staff=True)
    execution = Execution.objects.get(job=_job(tenant_create(slug="acme"), name="counted run"))
    _wait_for(lambda: Execution.objects.get(pk=execution.pk).state == "SUCCEEDED", message="the run")
    worker = fleet_stack.processes["worker"]
    name = f"{socket.gethostname()}:{worker.pid}"
    assert Execution.objects.get(pk=execution.pk).worker_id != name  # a pool process ran it
    page = _page(browser, fleet_stack, "olivia")
    page.goto(f"{fleet_stack.base}/dashboard/workers/")
    row = page.locator(f"[data-testid=worker-row][data-worker='{name}']")
    row.wait_for()
    assert row.get_attribute("data-live") == "true"
    assert "default" in row.inner_text() and "idle" in row.inner_text()
    assert row.locator("[data-testid=worker-processed]").inner_text() == "1"
    _shoot(page, "workers-wide")
    narrow = _page(browser, fleet_stack, "olivia", viewport=NARROW)
    narrow.goto(f"{fleet_stack.base}/dashboard/workers/")
    _shoot(narrow, "workers-narrow")
    narrow.context.close()

    page.evaluate("window.__sameDocument = true")
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
    page.wait_for_selector(
        f"[data-testid=worker-row][data-worker='{name}'][data-live=false]",
        timeout=(OFFLINE_SECONDS + 2 * 2 + 4) * 1000,
    )
    assert page.evaluate("window.__sameDocument") is True
    assert "offline · not seen" in page.locator(f"[data-testid=worker-row][data-worker='{name}']").inner_text()
    _shoot(page, "workers-offline-wide")
    page.context.close()
