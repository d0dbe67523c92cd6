"""Triage in a real browser (Debian's Chromium) against the real processes (daphne, a dispatcher
and a Celery worker, as dashboard/tests/test_browser.py starts them): a one-off job whose run
fails on the worker reads FAILED on the job list and page; the dead letter groups errors by
fingerprint, and a group retry (the worker then runs them) and a group discard act on whole
groups; the executions page finds by text and by id. Screenshots at 1280x800 and 390x844 in
test-artifacts/screenshots/."""

from datetime import timedelta

import pytest

from dashboard.tests.test_browser import NARROW, SCREENSHOTS, WIDE, Stack, _page, _user, _wait_for
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


@pytest.fixture
def triage_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    running = Stack("redis", tmp_path_factory.mktemp("var-triage")).start()
    yield running
    running.stop()


def _shoot_both(browser, stack, path: str, name: str, actions: str = "") -> None:
    """The page at 1280x800 and at 390x844, each a full-page screenshot; at 390 px the
    navigation must be reachable, the page must not scroll sideways, and the actions matching
    `actions` must be within the screen's width."""
    for label, viewport in (("wide", WIDE), ("narrow", NARROW)):
        page = _page(browser, stack, "ada", viewport=viewport)
        page.goto(f"{stack.base}{path}")
        if label == "narrow":
            # The navigation is behind the menu button at this width (app.js), one tap away.
            assert page.is_visible("[data-menu-toggle]") or page.locator("nav.nav a").first.is_visible()
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} scrolls sideways by {overflow}px at 390 px"
            for action in page.locator(actions).all() if actions else []:
                box = action.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= NARROW["width"] + 1, name
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
        page.context.close()


def _dead(job, error: str):
    """A job's execution DEAD with `error`, through the named transitions (as a worker's would be)."""
    from django.utils import timezone

    from executions import transitions
    from executions.models import Execution
    from executions.states import ExecutionState as S

    now = timezone.now()
    execution = Execution.objects.get(job=job)
    assert transitions.queue_many([execution.pk], now=now, publish_grace=timedelta(hours=1))
    token = Execution.objects.get(pk=execution.pk).lease_token
    assert transitions.start(
        execution_id=execution.pk, lease_token=token, now=now, worker_id="w:1", lease=timedelta(hours=1)
    )
    assert transitions.fail(execution_id=execution.pk, lease_token=token, now=now, error=error, traceback="")
    assert transitions.discard(execution_id=execution.pk, source=S.FAILED, now=now, message="attempts exhausted")
    return Execution.objects.get(pk=execution.pk)


def test_triage_failed_one_off_grouped_dead_letter_and_search(triage_stack, browser, transactional_db):
    from django.utils import timezone

    from executions.models import Execution
    from scheduling.job_creation import job_create
    from tenants.services import tenant_create

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    stack = triage_stack
    tenant = tenant_create(slug="acme")
    _user("ada", tenants=[tenant])
    now = timezone.now()

    def job(name: str, handler: str = "noop", **fields):
        fields = {"type": "ONCE", "name": name, "pool": "default", "handler": handler, "run_at": now, **fields}
        return job_create(tenant=tenant, fields=fields, now=now).job

    # A one-off that the real worker runs and that fails on its only attempt.
    failing = job(
        "invoice-export",
        "fail",
        payload={"message": "invoice 4711 rejected by ledger"},
        max_attempts=1,
    )
    failed = _wait_for(
        lambda: Execution.objects.filter(job=failing, state="DEAD").first(), timeout=30, message="the one-off DEAD"
    )
    # Two more kinds of failure, of jobs the worker would run successfully once re-driven.
    later = now + timedelta(hours=1)
    flaky = [
        _dead(job(f"ledger-sync-{n}", run_at=later), f"ConnectionError: 10.0.0.{n}:5432 refused") for n in (1, 2, 3)
    ]
    stale = [_dead(job(f"cache-warm-{n}", run_at=later), f"KeyError: 'order-{n}'") for n in (1, 2)]

    # The failed one-off reads FAILED, on the job list (and its failing filter) and its page.
    page = _page(browser, stack, "ada")
    page.goto(f"{stack.base}/dashboard/jobs/?failing=1")
    row = page.locator(f'tr[data-job="{failing.pk}"]')
    assert row.locator('[data-job-state="FAILED"]').count() == 1
    assert page.locator('tr[data-job] [data-job-state="FAILED"]').count() == page.locator("tr[data-job]").count() == 6
    page.goto(f"{stack.base}/dashboard/jobs/{failing.pk}/")
    assert page.locator('[data-job-state="FAILED"]').count() == 1
    assert "last run FAILED" in page.locator("[data-testid=last-run]").inner_text()
    _shoot_both(browser, stack, "/dashboard/jobs/?failing=1", "triage-jobs-failing")
    _shoot_both(browser, stack, f"/dashboard/jobs/{failing.pk}/", "triage-job-failed")

    # The dead letter: three groups, by fingerprint.
    page.click("nav.nav >> text=Dead letter")  # wide: the sidebar shows it
    page.wait_for_url(f"{stack.base}/dashboard/dead-letter/")
    groups = page.locator("[data-testid=dead-letter-groups] article")
    assert groups.count() == 3
    text = page.locator("[data-testid=dead-letter-groups]").inner_text()
    assert "ConnectionError: <ip> refused" in text and "KeyError: <str>" in text
    assert "HandlerFailure: invoice <n> rejected by ledger" in text
    group_actions = "[data-action=group-retry], [data-action=group-discard]"
    _shoot_both(browser, stack, "/dashboard/dead-letter/", "triage-dead-letter", group_actions)
    key = flaky[0].error_fingerprint
    _shoot_both(browser, stack, f"/dashboard/dead-letter/{key}/", "triage-dead-letter-group", group_actions)

    # Retry a whole group (confirmed): the worker runs each again, and they succeed.
    group = page.locator(f'article[data-fingerprint="{flaky[0].error_fingerprint}"]')
    group.locator("[data-action=group-retry]").click()
    page.wait_for_url(f"{stack.base}/dashboard/dead-letter/")
    assert "Re-driven 3 execution(s)" in page.locator(".messages").inner_text()
    _wait_for(
        lambda: (
            set(Execution.objects.filter(pk__in=[e.pk for e in flaky]).values_list("state", flat=True)) == {"SUCCEEDED"}
        ),
        timeout=30,
        message="the re-driven group to succeed",
    )

    # Discard a whole group (confirmed): it leaves the dead letter for good.
    group = page.locator(f'article[data-fingerprint="{stale[0].error_fingerprint}"]')
    group.locator("[data-action=group-discard]").click()
    page.wait_for_url(f"{stack.base}/dashboard/dead-letter/")
    assert "Discarded 2 execution(s)" in page.locator(".messages").inner_text()
    assert set(Execution.objects.filter(pk__in=[e.pk for e in stale]).values_list("state", flat=True)) == {"DISCARDED"}
    assert page.locator("[data-testid=dead-letter-groups] article").count() == 1
    page.goto(f"{stack.base}/dashboard/audit/")
    audit = page.locator("body").inner_text()
    assert "execution.discard" in audit and "execution.retry" in audit

    # The executions page: latest activity first, one search box for text and ids.
    page.goto(f"{stack.base}/dashboard/executions/")
    first = page.locator("[data-testid=executions-table] tbody tr").first.get_attribute("data-execution")
    newest = Execution.objects.order_by("-updated_at", "-id").values_list("pk", flat=True).first()
    assert first == str(newest)
    page.fill("[data-testid=execution-search]", "rejected by ledger")
    page.press("[data-testid=execution-search]", "Enter")
    page.wait_for_url("**q=rejected*")
    rows = page.locator("[data-testid=executions-table] tbody tr[data-execution]")
    assert [rows.nth(i).get_attribute("data-execution") for i in range(rows.count())] == [str(failed.pk)]
    page.fill("[data-testid=execution-search]", "ledger-sync")
    page.press("[data-testid=execution-search]", "Enter")
    page.wait_for_url("**q=ledger-sync*")
    assert page.locator("[data-testid=executions-table] tbody tr[data-execution]").count() == 3
    page.fill("[data-testid=execution-search]", str(stale[1].pk))
    page.press("[data-testid=execution-search]", "Enter")
    page.wait_for_url(f"**q={stale[1].pk}*")
    rows = page.locator("[data-testid=executions-table] tbody tr[data-execution]")
    assert rows.count() == 1 and rows.first.get_attribute("data-execution") == str(stale[1].pk)
    _shoot_both(browser, stack, "/dashboard/executions/?q=ledger", "triage-executions-search")
