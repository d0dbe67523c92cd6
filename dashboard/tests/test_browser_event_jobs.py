"""Every kind of job says what makes it fire, in a real browser (Debian's Chromium) at 1280x800 and
390x844 against the real web role (issue 31, item 9): an EVENT job's page and its row in the jobs
list say `on invoice.paid where {currency: "EUR"}` (its page said "Schedule: once at —", and the
list said nothing of the event); a workflow job's row names its steps' pools (it showed " · ");
cron, one-off and delayed jobs say their schedule, time or delay.

The processes are test_browser.py's (daphne, a dispatcher, a worker); screenshots go to
test-artifacts/screenshots/event-jobs-*.png."""

from datetime import UTC, datetime

import pytest

from dashboard.tests.test_browser import NARROW, SCREENSHOTS, WIDE, _page, _user
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture
from dashboard.tests.test_browser import stack as stack  # the module's processes

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


def _jobs(tenant) -> dict:
    from django.utils import timezone

    from scheduling.job_creation import job_create

    def make(**fields):
        fields.setdefault("pool", "default")
        fields.setdefault("handler", "noop")
        return job_create(tenant=tenant, fields=fields, now=timezone.now()).job

    steps = [
        {"name": "extract", "target": {"pool": "etl", "handler": "noop"}, "payload": {}, "depends_on": []},
        {"name": "load", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["extract"]},
    ]
    return {
        "event": make(
            name="mark invoice paid", type="EVENT", event_name="invoice.paid", event_filter={"currency": "EUR"}
        ),
        "workflow": make(
            name="nightly etl",
            type="CRON",
            schedule="0 2 * * *",
            timezone="Europe/Paris",
            pool="",
            handler="",
            workflow={"steps": steps},
        ),
        "cron": make(name="billing rollup", type="CRON", schedule="*/5 * * * *", timezone="America/New_York"),
        "once": make(name="launch mail", type="ONCE", run_at=datetime(2030, 3, 14, 9, tzinfo=UTC)),
        "delayed": make(name="reminder", type="DELAYED", delay_sec=86_400),
    }


def test_every_kind_of_job_says_what_makes_it_fire(stack, browser, transactional_db):
    """In the jobs list each row's trigger line reads as the job is defined; the EVENT job's page
    says "Trigger: on invoice.paid where {currency: "EUR"}" and never "once at"; the workflow's
    page names its steps' pools."""
    from tenants.services import tenant_create

    acme = tenant_create(slug="acme")
    _user("olivia", staff=True)
    jobs = _jobs(acme)
    expected = {
        "event": 'on invoice.paid where {currency: "EUR"}',
        "workflow": "0 2 * * * in Europe/Paris",
        "cron": "*/5 * * * * in America/New_York",
        "once": "once at 2030-03-14 09:00:00Z",
        "delayed": "once, 1 d after creation: " + jobs["delayed"].run_at.strftime("%Y-%m-%d %H:%M:%SZ"),
    }

    for label, viewport in (("wide", WIDE), ("narrow", NARROW)):
        page = _page(browser, stack, "olivia", viewport=viewport)
        page.goto(f"{stack.base}/dashboard/jobs/")
        for kind, job in jobs.items():
            trigger = page.locator(f'tr[data-job="{job.pk}"] [data-testid=job-trigger]')
            assert trigger.is_visible(), kind
            assert trigger.inner_text().strip() == expected[kind], kind
        workflow_row = page.inner_text(f'tr[data-job="{jobs["workflow"].pk}"]')
        assert "workflow of 2 steps in pools etl, default" in workflow_row, workflow_row
        assert "noop in pool default" in page.inner_text(f'tr[data-job="{jobs["event"].pk}"]')
        page.screenshot(path=str(SCREENSHOTS / f"event-jobs-list-{label}.png"), full_page=True)

        page.goto(f"{stack.base}/dashboard/jobs/{jobs['event'].pk}/")
        definition = page.inner_text("#job-summary .kv")
        assert "once at" not in page.inner_text("main")
        assert f"Trigger\n{expected['event']}" in definition, definition
        assert "noop in pool default" in definition
        assert "fires once for each event that matches" in page.inner_text("#job-summary")
        page.screenshot(path=str(SCREENSHOTS / f"event-jobs-event-{label}.png"), full_page=True)

        page.goto(f"{stack.base}/dashboard/jobs/{jobs['workflow'].pk}/")
        definition = page.inner_text("#job-summary .kv")
        assert f"Schedule\n{expected['workflow']}" in definition, definition
        assert "workflow of 2 steps in pools etl, default, below" in definition, definition
        page.screenshot(path=str(SCREENSHOTS / f"event-jobs-workflow-{label}.png"), full_page=True)
        page.context.close()
