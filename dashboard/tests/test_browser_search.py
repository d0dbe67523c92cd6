"""Every search box of the dashboard, in a real browser (Debian's Chromium) at 1280x800 and 390x844
against the real web role (issue 31, item 10): an operator copies an id as a page shows it (the
short id of a list, or the whole id of a detail page) into a box and finds what it names. The
boxes: Jobs, Executions (and the dead letter, the same box), the Audit log's "Target id". The
short id the jobs list shows found nothing on Executions.

The processes are test_browser.py's (daphne, a dispatcher, a worker); screenshots go to
test-artifacts/screenshots/search-*.png."""

import pytest

from dashboard.tests.test_browser import NARROW, SCREENSHOTS, WIDE, _page, _user, _wait_for
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture
from dashboard.tests.test_browser import stack as stack  # the module's processes

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


def _search(page, base: str, path: str, box: str, text: str) -> None:
    """Type `text` into the page's box and submit it, as an operator does."""
    page.goto(f"{base}{path}")
    page.fill(box, text)
    page.press(box, "Enter")
    page.wait_for_load_state()


def test_each_search_box_finds_by_the_ids_the_pages_show(stack, browser, transactional_db):
    """From the jobs list, a job's short id finds it on Jobs, its executions on Executions, and
    what was done to it on the Audit log; from the executions list, an execution's short id finds
    it on Executions, on the dead letter and on the Audit log; the whole id from a detail page,
    without its dashes, finds the same; another job never shows."""
    from datetime import timedelta

    from django.utils import timezone

    from dashboard.tests.test_browser import _job
    from executions.models import Execution
    from tenants.services import tenant_create

    acme = tenant_create(slug="acme")
    _user("olivia", staff=True)
    later = timezone.now() + timedelta(hours=2)
    job = _job(acme, name="invoice export", run_at=later)
    other = _job(acme, name="payroll sync", run_at=later)
    broken = _job(acme, name="ledger push", handler="fail", max_attempts=1)
    dead = Execution.objects.get(job=broken)
    _wait_for(lambda: Execution.objects.get(pk=dead.pk).state == "DEAD", message="the execution to die")

    for label, viewport in (("wide", WIDE), ("narrow", NARROW)):
        page = _page(browser, stack, "olivia", viewport=viewport)
        page.goto(f"{stack.base}/dashboard/jobs/")
        short_job = page.inner_text(f'tr[data-job="{job.pk}"] td.name .mono').split(" ")[0].strip()
        assert len(short_job) == 8 and str(job.pk).startswith(short_job)
        if label == "wide":  # something done to the job and to the execution, for the audit log
            page.goto(f"{stack.base}/dashboard/jobs/{job.pk}/")
            page.click("[data-action=pause]")
            page.wait_for_selector(".message-success")
            page.goto(f"{stack.base}/dashboard/executions/?state=DEAD")
            page.check(f'input[name=ids][value="{dead.pk}"]')
            page.click("[data-testid=retry-selected]")
            page.wait_for_selector(".message-success")
            _wait_for(lambda: Execution.objects.get(pk=dead.pk).state == "DEAD", message="the retry to die again")

        _search(page, stack.base, "/dashboard/jobs/", "input[name=q]", short_job)
        rows = page.locator("[data-testid=jobs-table] tbody tr[data-job]")
        assert [row.get_attribute("data-job") for row in rows.all()] == [str(job.pk)]
        page.screenshot(path=str(SCREENSHOTS / f"search-jobs-{label}.png"), full_page=True)

        _search(page, stack.base, "/dashboard/executions/", "[data-testid=execution-search]", short_job)
        shown = page.locator("[data-testid=executions-table] tbody tr[data-execution]")
        expected = {str(e.pk) for e in Execution.objects.filter(job=job)}
        assert {row.get_attribute("data-execution") for row in shown.all()} == expected
        assert str(other.pk)[:8] not in page.inner_text("[data-testid=executions-table]")
        page.screenshot(path=str(SCREENSHOTS / f"search-executions-{label}.png"), full_page=True)

        page.goto(f"{stack.base}/dashboard/executions/?state=DEAD")
        short_dead = page.inner_text(f'tr[data-execution="{dead.pk}"] td.mono a').strip()
        assert str(dead.pk).startswith(short_dead)
        for path in ("/dashboard/executions/", "/dashboard/executions/?state=DEAD"):
            _search(page, stack.base, path, "[data-testid=execution-search]", short_dead)
            shown = page.locator("[data-testid=executions-table] tbody tr[data-execution]")
            assert [row.get_attribute("data-execution") for row in shown.all()] == [str(dead.pk)], path

        page.goto(f"{stack.base}/dashboard/executions/{dead.pk}/")
        whole = str(dead.pk)
        assert whole in page.inner_text("main")
        for text in (short_dead, whole.replace("-", ""), whole.upper()):
            _search(page, stack.base, "/dashboard/audit/", "input[name=target]", text)
            table = page.inner_text("main table")
            assert "execution.retry" in table and "job.pause" not in table, text
        _search(page, stack.base, "/dashboard/audit/", "input[name=target]", short_job)
        table = page.inner_text("main table")
        assert "job.pause" in table and "execution.retry" not in table
        page.screenshot(path=str(SCREENSHOTS / f"search-audit-{label}.png"), full_page=True)
        page.context.close()
