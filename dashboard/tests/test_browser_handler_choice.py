"""The job form's handler choice in a real browser (Debian's Chromium) against the real web role,
at 1280x800 and 390x844 (issue 33): each handler is offered with its pool, and choosing one says
what it does, the payload it takes and the pool its jobs run in by default, as GET /v1/handlers
describes them.

The processes are test_browser.py's (daphne, a dispatcher, a worker); screenshots go to
test-artifacts/screenshots/handler-choice-*.png."""

import pytest

from dashboard.tests.test_browser import NARROW, SCREENSHOTS, WIDE, _page, _user
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture
from dashboard.tests.test_browser import stack as stack  # the module's processes

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


def test_choosing_a_handler_says_what_it_does_and_takes(stack, browser, transactional_db):
    from tenants.services import tenant_create

    tenant = tenant_create(slug="acme")
    _user("ada", tenants=[tenant])
    for name, viewport in (("wide", WIDE), ("narrow", NARROW)):
        page = _page(browser, stack, "ada", viewport=viewport)
        page.goto(f"{stack.base}/dashboard/jobs/new")
        about = page.locator("[data-handler-about]")
        assert about.inner_text() == "Returns its payload. Payload: any JSON object."
        options = page.locator("[data-handler-select] option").all_inner_texts()
        assert "sleep · default" in options and "http · default" in options

        page.select_option("[data-handler-select]", "http")
        assert about.inner_text().startswith("Calls `url` with `method`")
        assert about.inner_text().endswith("Payload: url (required), method, headers, body, timeoutSec.")
        assert page.locator("[data-handler-pool]").inner_text() == "Handler's default (default)"
        assert about.is_visible()
        box, select = about.bounding_box(), page.locator("[data-handler-select]").bounding_box()
        assert box and select and box["x"] + box["width"] <= viewport["width"]  # it wraps, never overflows
        page.screenshot(path=str(SCREENSHOTS / f"handler-choice-{name}.png"), full_page=True)
        page.context.close()
