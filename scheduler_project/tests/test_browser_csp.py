"""The Content-Security-Policy breaks nothing in a real browser: Swagger UI (/v1/docs) and the
admin run under it through daphne without a violation. (The dashboard's browser tests,
dashboard/tests/test_browser.py, run under it too.)"""

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
CHROMIUM = "/usr/bin/chromium"
PASSWORD = "correct horse battery staple"

if not Path(CHROMIUM).exists():  # pragma: no cover - the CI script installs it
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)


@pytest.fixture
def admin(transactional_db):
    """Made before the browser starts: Playwright runs an event loop in this thread."""
    return get_user_model().objects.create_superuser("admin", "admin@example.com", PASSWORD)


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.violations = []
        page.on("console", lambda m: "Content Security Policy" in m.text and page.violations.append(m.text))
        yield page
        browser.close()


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


def test_defect9_api_docs_and_admin_work_under_the_content_security_policy(admin, web_server, page):
    """Swagger UI renders the schema and the admin logs in, with no CSP violation reported."""
    base = f"http://127.0.0.1:{web_server().port}"
    response = page.goto(f"{base}/v1/docs")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(".swagger-ui .info .title:has-text('Tickwork API')")
    page.wait_for_selector(".opblock-summary-path:has-text('/v1/jobs')")
    page.goto(f"{base}/admin/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    page.goto(f"{base}/admin/jobs/job/")
    page.wait_for_selector("#changelist")
    assert page.violations == []
