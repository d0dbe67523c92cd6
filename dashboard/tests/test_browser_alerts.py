"""An active alert in a real browser (Debian's Chromium) against the real web role (daphne, with a
dispatcher and a worker beside it, as dashboard/tests/test_browser.py starts them): a rule is
breached and evaluated (the alerter's unit of work); an open page shows the banner within its
poll, without a reload; every page shows it; once resolved it goes."""

import pytest

from dashboard.tests.test_browser import SCREENSHOTS, Stack, _page, _user, _wait_for
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


@pytest.fixture
def alert_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    running = Stack("redis", tmp_path_factory.mktemp("var-alerts")).start()
    yield running
    running.stop()


def test_an_active_alert_shows_on_every_page_and_goes_when_resolved(alert_stack, browser, transactional_db, drive):
    from datetime import timedelta

    from alerts.models import AlertRule
    from executions.clock import db_now
    from executions.models import Execution
    from scheduling.job_creation import job_create
    from tenants.services import tenant_create
    from testing.steps import alerter_pass

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tenant = tenant_create(slug="acme")
    _user("ada", tenants=[tenant])
    AlertRule.objects.create(
        tenant=tenant,
        name="payments dead letters",
        kind="DEAD_LETTER",
        threshold=0,
        window_sec=300,
        channels=[{"type": "email", "to": "oncall@example.com"}],
    )
    page = _page(browser, alert_stack, "ada")
    assert page.locator("[data-testid=alert-banner]").count() == 0

    # A run that went DEAD, through the state machine's transitions (as a worker's would be).
    now = db_now()
    job = job_create(
        tenant=tenant,
        fields={
            "type": "ONCE",
            "name": "charge card",
            "run_at": now + timedelta(hours=1),
            "pool": "default",
            "handler": "noop",
        },
        now=now,
    ).job
    drive(Execution.objects.get(job=job), "DEAD")
    assert alerter_pass(db_now())["alert_evaluation"].fired == 1

    banner = page.locator("[data-testid=alert-banner]")
    banner.wait_for(timeout=15_000)  # the open page reads the banner again every 5 s
    assert "1 alert firing" in banner.inner_text() and "payments dead letters" in banner.inner_text()
    assert "went DEAD" in banner.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "alert-banner.png"), full_page=True)

    for path in ("/dashboard/jobs/", "/dashboard/executions/", f"/dashboard/jobs/{job.pk}/"):
        page.goto(f"{alert_stack.base}{path}")
        assert "payments dead letters" in page.locator("[data-testid=alert-banner]").inner_text(), path
    page.click("[data-testid=alert-banner] a")
    page.wait_for_url(f"{alert_stack.base}/dashboard/alerts/*")
    assert "FIRING" in page.locator("[data-testid=alerts-table]").inner_text()

    assert alerter_pass(db_now() + timedelta(seconds=301))["alert_evaluation"].resolved == 1
    _wait_for(lambda: page.locator("[data-testid=alert-banner]").count() == 0, message="the banner to go")
