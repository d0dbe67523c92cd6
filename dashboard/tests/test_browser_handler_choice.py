"""The job form's target in a real browser (Debian's Chromium) against the real web role, at
1280x800 and 390x844 (issue 33): each handler is offered with its pool, and choosing one says
what it does, the payload it takes and the pool its jobs run in by default, as GET /v1/handlers
describes them; the defined rate limits are offered, a limit removed while the form was open is
the API's error beside its field, and the job page says the limit and why a run over it waits.

The processes are test_browser.py's (daphne, a dispatcher, a worker); screenshots go to
test-artifacts/screenshots/handler-choice-*.png and rate-limit-*.png."""

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.tests.test_browser import NARROW, SCREENSHOTS, WIDE, _page, _user
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture
from dashboard.tests.test_browser import stack as stack  # the module's processes

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


def test_choosing_a_handler_says_what_it_does_and_takes_and_a_rate_limit_holds_it(stack, browser, transactional_db):
    from pools import rate_limits
    from tenants.services import tenant_create

    tenant = tenant_create(slug="acme")
    rate_limits.define(name="payments", per_second=10, burst=1)
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
        _choose_a_rate_limit(page, name, viewport)
        page.context.close()


def _within(page, selector: str, viewport) -> None:
    """`selector` is whole on the screen, and the page does not scroll sideways. Measured again for
    up to 5 s: the live feed may re-render its region as the page opens (a run made within its
    slack of the render), and an element replaced as it is measured has no box."""
    box = None
    for _ in range(50):
        box = page.locator(selector).first.bounding_box()
        if box:
            break
        page.wait_for_timeout(100)
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], (selector, box)
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0


def _choose_a_rate_limit(page, name: str, viewport) -> None:
    """On the form the http handler chose: the target's rate limit, refused once (removed while
    the form was open), then saved; the job page says it, and why its run over it waits."""
    from executions.models import Execution
    from jobs.models import Job
    from pools import rate_limits

    limit = page.locator("select[name=rateLimit]")
    assert limit.locator("option").all_inner_texts() == ["None — the handler's own", "payments (10/s, burst 1)"]
    page.fill("input[name=name]", f"charge cards {name}")
    page.fill("input[name=runAt]", (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    page.fill("textarea[name=payload]", '{"url": "https://example.com/charge"}')
    limit.select_option("payments")
    rate_limits.remove(name="payments")
    page.click("[data-testid=submit-job]")
    error = page.locator('[data-error-for="rateLimit"]')
    assert error.inner_text() == 'unknown rate limit "payments"; known: none is defined (manage.py rate_limit set)'
    _within(page, '[data-error-for="rateLimit"]', viewport)
    page.screenshot(path=str(SCREENSHOTS / f"rate-limit-error-{name}.png"), full_page=True)

    rate_limits.define(name="payments", per_second=10, burst=1)
    page.click("[data-testid=submit-job]")
    page.wait_for_url("**/dashboard/jobs/*/")
    assert page.inner_text("[data-testid=job-rate-limit]") == "payments (10/s, burst 1)"
    turn = datetime.now(UTC) + timedelta(minutes=5)  # as a claim gives one: due at its turn
    Execution.objects.filter(job=Job.objects.get(name=f"charge cards {name}")).update(
        available_at=turn, rate_turn_at=turn
    )
    page.reload()
    reason = page.locator("[data-testid=pending-reason]")
    assert reason.inner_text().startswith("RATE_LIMITED rate limit payments (10/s, burst 1) is reached")
    _within(page, "[data-testid=pending-reason] .clamp", viewport)
    page.screenshot(path=str(SCREENSHOTS / f"rate-limit-job-{name}.png"), full_page=True)
