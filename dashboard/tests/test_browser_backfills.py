"""A backfill started and cancelled from a job's page, in a real browser (Debian's Chromium) against
the real web role (test_browser.py's daphne, dispatcher and worker): at 1280x800 the Backfill form
answers with its dry run and "Start backfill" makes it, listed in the job's Backfills; at 390x844
the form and its dry run fit without scrolling sideways, and a RUNNING backfill's Cancel, asked
in a confirm dialog, cancels it. Screenshots: test-artifacts/screenshots/backfill-*.png.

The stack runs no sweeper, so nothing of the backfill is released meanwhile: it stays RUNNING
with every fire waiting until the cancel."""

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.tests.test_browser import NARROW, _job, _page, _shoot, _user
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture
from dashboard.tests.test_browser import stack as stack  # the module's processes

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


def _fill(page, start: datetime, end: datetime, *, reprocess: str, at_once: str) -> None:
    form = page.locator("[data-testid=backfill-form]")
    form.locator("input[name=from]").fill(start.strftime("%Y-%m-%dT%H:%M"))
    form.locator("input[name=to]").fill(end.strftime("%Y-%m-%dT%H:%M"))
    form.locator("select[name=reprocess]").select_option(reprocess)
    form.locator("input[name=maxConcurrent]").fill(at_once)
    form.locator("[data-testid=backfill-preview]").click()
    page.wait_for_selector("[data-testid=backfill-plan]")


def _sideways(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_a_backfill_started_at_1280_and_cancelled_at_390(stack, browser, transactional_db):
    """Preview shows the dry run (6 hourly fires, all to run); Start makes the backfill, named in
    the success message and listed RUNNING; at 390 px the page fits, Cancel asks first, and the
    row then reads CANCELLED. Both actions are in the audit log under the user's name."""
    from dashboard.models import AuditEntry
    from executions.models import Backfill
    from tenants.services import tenant_create

    acme = tenant_create(slug="acme")
    _user("ada", tenants=[acme])
    job = _job(acme, name="billing-rollup", type="CRON", schedule="0 * * * *", run_at=None)
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    start = end - timedelta(hours=6)

    wide = _page(browser, stack, "ada")
    wide.goto(f"{stack.base}/dashboard/jobs/{job.pk}/")
    assert "No backfills yet." in wide.inner_text("#job-backfills")
    _fill(wide, start, end, reprocess="FAILED", at_once="2")
    summary = wide.inner_text("[data-testid=backfill-plan-summary]")
    assert "6 fires in the range: 6 to run, 0 to run again, 0 skipped" in summary, summary
    assert wide.locator("[data-testid=backfill-plan-fires] tbody tr").count() == 6
    assert wide.input_value("[data-testid=backfill-form] select[name=reprocess]") == "FAILED"  # kept
    assert not Backfill.objects.exists()  # a dry run writes nothing
    _shoot(wide, "backfill-dry-run-wide")
    wide.click("[data-testid=backfill-start]")
    wide.wait_for_selector(".message-success")

    backfill = Backfill.objects.get(job=job)
    assert (backfill.range_from, backfill.range_to, backfill.reprocess, backfill.max_concurrent) == (
        start,
        end,
        "FAILED",
        2,
    )
    assert f"backfill {str(backfill.pk)[:8]} started: 6 fire(s) to run" in wide.inner_text(".message-success")
    row = wide.locator(f'tr[data-backfill="{backfill.pk}"]')
    assert row.locator("[data-testid=backfill-state]").inner_text() == "RUNNING"
    assert "0/6" in row.inner_text()
    assert _sideways(wide) <= 0
    _shoot(wide, "backfill-started-wide")
    wide.context.close()

    narrow = _page(browser, stack, "ada", viewport=NARROW)
    questions: list[str] = []
    narrow.on("dialog", lambda dialog: questions.append(dialog.message))
    narrow.goto(f"{stack.base}/dashboard/jobs/{job.pk}/")
    assert _sideways(narrow) <= 0
    _fill(narrow, start, end, reprocess="NONE", at_once="1")  # the same range: every fire planned already
    assert "6 skipped" in narrow.inner_text("[data-testid=backfill-plan-summary]")
    assert narrow.is_visible("[data-testid=backfill-nothing]")
    assert _sideways(narrow) <= 0
    _shoot(narrow, "backfill-dry-run-narrow")

    narrow.goto(f"{stack.base}/dashboard/jobs/{job.pk}/#job-backfills")
    cancel = narrow.locator(f'tr[data-backfill="{backfill.pk}"] [data-action=cancel-backfill]')
    box = cancel.bounding_box()
    assert box is not None and 0 <= box["x"] and box["x"] + box["width"] <= NARROW["width"], box
    _shoot(narrow, "backfill-running-narrow")
    cancel.click()
    narrow.wait_for_selector(".message-success")
    assert questions and questions[0].startswith(f"Cancel backfill {str(backfill.pk)[:8]}?"), questions
    backfill.refresh_from_db()
    assert backfill.state == "CANCELLED"
    row = narrow.locator(f'tr[data-backfill="{backfill.pk}"]')
    assert row.locator("[data-testid=backfill-state]").inner_text() == "CANCELLED"
    assert row.locator("[data-action=cancel-backfill]").count() == 0
    assert _sideways(narrow) <= 0
    _shoot(narrow, "backfill-cancelled-narrow")
    narrow.context.close()

    audited = list(AuditEntry.objects.filter(action__startswith="backfill.").order_by("at"))
    assert [(row.action, row.outcome, row.actor) for row in audited] == [
        ("backfill.create", "OK", "ada"),
        ("backfill.cancel", "OK", "ada"),
    ]
