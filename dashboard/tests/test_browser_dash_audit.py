"""In a real browser (Debian's Chromium) against the real web role (daphne, with a dispatcher and a
worker beside it, as dashboard/tests/test_browser.py starts them): an API action arriving live on
open pages and in the audit log, the 390 px menu and row actions, the upcoming-fires view, and a
screenshot of every page of dashboard/urls.py at 1280x800 and 390x844.

The every-page screenshots go to $TICKWORK_PAGE_SCREENSHOTS if set, else to `page-screenshots`
under pytest's basetemp; the other tests' to test-artifacts/screenshots, beside test_browser.py's."""

import json
import os
import re
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import URLPattern
from django.utils import timezone

from dashboard.tests.test_browser import NARROW, WIDE, Stack, _job, _page, _shoot, _user, _wait_for
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


@pytest.fixture(scope="module")
def stack(django_db_setup, django_db_blocker, tmp_path_factory):
    running = Stack("redis", tmp_path_factory.mktemp("var-dash-audit")).start()
    yield running
    running.stop()


def _api(stack, raw: str, method: str, path: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{stack.base}{path}", method=method, headers={"Authorization": f"Bearer {raw}"}, data=b""
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read() or b"{}")


def _badge_of_row(page, job_id: str) -> str:
    return page.inner_text(f'tr[data-job="{job_id}"] .badge')


def test_a_job_paused_through_the_api_shows_paused_on_open_pages_live(stack, browser, transactional_db):
    """The job list and the job's page are open; a token pauses the job through the API: both show
    PAUSED without a reload, within the live feed's interval (1 s with Redis, plus the refresh),
    and the audit log lists the action under the token's name."""
    from tenants.services import tenant_create, token_create

    acme = tenant_create(slug="acme")
    _user("ada", tenants=[acme])
    job = _job(acme, name="nightly-export", type="CRON", schedule="0 0 * * *", run_at=None)
    _, raw = token_create(tenant=acme, name="deploy")
    listing = _page(browser, stack, "ada")
    listing.goto(f"{stack.base}/dashboard/jobs/")
    detail = listing.context.new_page()
    detail.goto(f"{stack.base}/dashboard/jobs/{job.pk}/")
    for page in (listing, detail):
        page.wait_for_selector("[data-live-status=live]")
    assert _badge_of_row(listing, str(job.pk)) == "ACTIVE"

    began = time.monotonic()
    assert _api(stack, raw, "POST", f"/v1/jobs/{job.pk}/pause")[0] == 200
    _wait_for(lambda: _badge_of_row(listing, str(job.pk)) == "PAUSED", timeout=5, message="the list to show PAUSED")
    listed_after = time.monotonic() - began
    _wait_for(
        lambda: "PAUSED" in detail.inner_text("#job-summary .summary-state"),
        timeout=5,
        message="the job's page to show PAUSED",
    )
    assert listed_after < 3.0, f"the pause took {listed_after:.1f}s to show"
    assert detail.is_visible("#job-summary [data-action=resume]")  # the actions follow the state
    _shoot(listing, "live-job-paused-list-wide")
    _shoot(detail, "live-job-paused-detail-wide")

    audit = listing.context.new_page()
    audit.goto(f"{stack.base}/dashboard/audit/?kind=api")
    row = audit.inner_text("[data-testid=audit-table] tbody tr")
    assert "token deploy (" in row and "of acme" in row and "job.pause" in row and "OK" in row
    _shoot(audit, "audit-api-action-wide")
    narrow = _page(browser, stack, "ada", viewport=NARROW)
    narrow.goto(f"{stack.base}/dashboard/audit/?kind=api")
    _shoot(narrow, "audit-api-action-narrow")
    narrow.context.close()
    listing.context.close()


def test_at_390_px_the_menu_opens_navigates_and_a_row_action_works(stack, browser, transactional_db):
    """At 390x844 the sections fold behind Menu; it opens, a section is reached through it, and a
    job's Pause in its row is in view (the actions column sticks) and works."""
    from jobs.models import Job
    from tenants.services import tenant_create

    acme = tenant_create(slug="acme")
    _user("ada", tenants=[acme])
    job = _job(acme, name="a-job-with-a-rather-long-name-to-push-the-columns", type="CRON", schedule="0 * * * *")
    page = _page(browser, stack, "ada", viewport=NARROW)

    assert page.is_visible("[data-menu-toggle]")
    assert not page.is_visible("nav.nav a[href='/dashboard/jobs/']")
    _shoot(page, "menu-closed-narrow")
    page.click("[data-menu-toggle]")
    assert page.get_attribute("[data-menu-toggle]", "aria-expanded") == "true"
    _shoot(page, "menu-open-narrow")
    page.click("nav.nav a[href='/dashboard/jobs/']")
    page.wait_for_url(f"{stack.base}/dashboard/jobs/")
    assert not page.is_visible("nav.nav a[href='/dashboard/jobs/']")  # a new page starts folded

    pause = page.locator(f'tr[data-job="{job.pk}"] [data-action=pause]')
    box = pause.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= NARROW["width"], box
    _shoot(page, "jobs-row-actions-narrow")
    pause.click()
    page.wait_for_selector(".message-success")
    assert Job.objects.get(pk=job.pk).state == "PAUSED"
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    page.context.close()


def test_the_upcoming_fires_view_shows_a_midnight_herd_and_lists_a_buckets_jobs(stack, browser, transactional_db):
    """40 jobs firing daily at the same minute make the busiest bucket, shown chosen with 25 jobs
    named "and 15 more"; the pool's capacity is beside it; clicking another bar (the first not
    chosen: an hourly job's, before or after the herd's by the time of day) lists that bucket's
    jobs. The herd's hour is some six hours ahead: the page's 24 hours start at the current
    bucket, so a midnight herd fell outside them from 00:00 to 00:15."""
    from executions.clock import db_now
    from pools import registry
    from tenants.services import tenant_create

    hour = (timezone.now() + timedelta(hours=6)).hour
    acme = tenant_create(slug="acme")
    _user("ada", tenants=[acme])
    for i in range(40):
        _job(acme, name=f"export-{i:02}", type="CRON", schedule=f"0 {hour} * * *", run_at=None)
    _job(acme, name="hourly-sync", type="CRON", schedule="30 * * * *", run_at=None)
    # The last test's flush emptied the worker registry; the stack's worker registers again at
    # its next beat, later on a loaded machine.
    _wait_for(lambda: "default" in registry.capacity(db_now()), message="the worker to register again")

    for label, viewport in (("wide", WIDE), ("narrow", NARROW)):
        page = _page(browser, stack, "ada", viewport=viewport)
        if label == "narrow":
            page.click("[data-menu-toggle]")
        page.click("nav.nav a[href='/dashboard/upcoming/']")
        page.wait_for_selector("[data-testid=upcoming-chart]")
        chosen = page.inner_text("[data-testid=upcoming-bucket] .panel-head")
        assert chosen.startswith(f"{hour:02}:00") and f"{hour:02}:15 UTC" in chosen, chosen
        assert "40 fires of 40 jobs" in chosen, chosen
        assert page.locator("[data-testid=upcoming-bucket] tbody tr").count() == 25
        assert page.inner_text("[data-testid=upcoming-more]") == "and 15 more jobs"
        pool = page.inner_text("[data-testid=upcoming-pools] tr[data-pool=default]")
        assert f"40 at {hour:02}:00" in pool and "over capacity" in pool  # the test worker has 2 slots
        _shoot(page, f"upcoming-{label}")
        if label == "wide":
            page.locator("[data-testid=upcoming-chart] a:not(:has(rect.chosen))").first.click()
            page.wait_for_url("**bucket=*")
            other = page.inner_text("[data-testid=upcoming-bucket]")
            assert "hourly-sync" in other and "export-" not in other
            _shoot(page, "upcoming-other-bucket-wide")
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        page.context.close()


def _page_paths(objects: dict[str, str]) -> dict[str, str]:
    """Every page of dashboard/urls.py, its parameters filled from `objects`: a page added later
    is covered without touching this test (a parameter this does not know fails it)."""
    from dashboard import urls

    paths = {}
    for pattern in urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        route = str(pattern.pattern)
        missing = set(pattern.pattern.converters) - set(objects)
        assert not missing, f"{route}: no value for {missing}; add one to the test's objects"
        filled = re.sub(r"<(?:\w+:)?(\w+)>", lambda match: objects[match.group(1)], route)
        paths[pattern.name or route] = f"/dashboard/{filled}"
    return paths


def test_every_dashboard_page_at_1280_and_390_without_errors_or_sideways_scrolling(
    stack, browser, transactional_db, tmp_path_factory, drive
):
    """Each page of dashboard/urls.py (POST-only ones answer 405 and are not pages; fragments are
    shot too) at both sizes: none errors (no 4xx/5xx, no script error) and at 390 px none scrolls
    sideways. The PNGs go to $TICKWORK_PAGE_SCREENSHOTS or <basetemp>/page-screenshots."""
    from dashboard.tests.test_run_views import _fire, _workflow_job
    from executions.models import Execution
    from scheduling.backfills import backfill_create
    from tenants.services import tenant_create

    out = Path(os.environ.get("TICKWORK_PAGE_SCREENSHOTS") or tmp_path_factory.getbasetemp() / "page-screenshots")
    out.mkdir(parents=True, exist_ok=True)
    acme = tenant_create(slug="acme")
    _user("olivia", staff=True)
    cron = _job(acme, name="billing-rollup", type="CRON", schedule="*/5 * * * *", timezone="America/New_York")
    # Due in an hour, so the stack's dispatcher leaves it to `drive`.
    later = timezone.now() + timedelta(hours=1)
    dead = drive(Execution.objects.get(job=_job(acme, name="flaky-sync", handler="fail", run_at=later)), "DEAD")
    run_id, _ = _fire(_workflow_job(acme))
    # A RUNNING backfill of the cron job: its page lists it with its Cancel (no sweeper releases it).
    until = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    backfill = backfill_create(
        job=cron,
        start=until - timedelta(hours=2),
        end=until,
        order="OLDEST_FIRST",
        reprocess="NONE",
        max_concurrent=2,
        now=timezone.now(),
    )
    objects = {"job_id": str(cron.pk), "execution_id": str(dead.pk), "run_id": str(run_id), "number": "1"}
    objects["backfill_id"] = str(backfill.pk)
    objects["action"] = "pause"
    objects["pool"] = "default"
    objects["fingerprint"] = dead.error_fingerprint  # the dead letter's error group
    paths = _page_paths(objects)

    shot, not_pages = [], []
    for label, viewport in (("wide", WIDE), ("narrow", NARROW)):
        page = _page(browser, stack, "olivia", viewport=viewport)
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        for name, path in paths.items():
            # Asked first without rendering: Chromium will not load an empty 405 as a page, and a
            # region a page polls (the workers' table, the alerts' banner) is not a page of its own.
            asked = page.request.get(f"{stack.base}{path}")
            if asked.status == 405 or "<html" not in asked.text():  # an action's URL (POST only), a region
                not_pages.append(name)
                continue
            response = page.goto(f"{stack.base}{path}")
            assert response is not None and response.status == 200, f"{path} answered {response and response.status}"
            page.wait_for_timeout(200)
            page.screenshot(path=str(out / f"{name}-{label}.png"), full_page=True)
            shot.append(f"{name}-{label}")
            if label == "narrow":
                overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 0, f"{path} scrolls sideways by {overflow}px at 390 px"
        page.context.close()
        assert errors == [], errors
    assert {"overview-wide", "upcoming-narrow", "audit-narrow", "run-detail-wide", "workers-narrow"} <= set(shot)
    assert {"job-backfill-wide", "job-backfill-narrow"} <= set(shot)
    print(json.dumps({"screenshots": str(out), "pages": sorted(shot), "post_only": sorted(set(not_pages))}))
