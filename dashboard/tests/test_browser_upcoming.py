"""The Upcoming page in a real browser (Debian's Chromium) against the real web role, at 1280x800
and 390x844 (issue 31, item 8): an every-minute job's bars run the whole 24 hours with their true
counts (no cliff where an expansion stopped), a workflow job's fires count in its steps' pools
(no blank pool "over capacity"), and the Pools table fits its card.

The processes are test_browser.py's (daphne, a dispatcher, a worker); screenshots go to
test-artifacts/screenshots/upcoming-*.png."""

import itertools
import re

import pytest

from dashboard.tests.test_browser import NARROW, SCREENSHOTS, WIDE, _page, _user
from dashboard.tests.test_browser import browser as browser  # the module's Chromium fixture
from dashboard.tests.test_browser import stack as stack  # the module's processes

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

BAR_TITLE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:(\d\d)):\d\dZ UTC — (\d+) fires?$")


@pytest.fixture(autouse=True)
def _fast_password_hashing():
    """Overrides conftest's: daphne checks passwords with the real settings' hashers."""


def _bars(page) -> list[tuple[str, int, int]]:
    """Each drawn bar as (its bucket's start, its start's minute, its count), from its tooltip."""
    shown = []
    for title in page.locator("[data-testid=upcoming-chart] .up-bar title").all_text_contents():
        match = BAR_TITLE.match(title.strip())
        assert match, title
        shown.append((match[1], int(match[2]), int(match[3])))
    return shown


def _pool_fires(page) -> dict[str, int]:
    """Each row of the Pools table: its pool's name as shown, and its "Fires 24 h"."""
    rows = {}
    for row in page.locator("[data-testid=upcoming-pools] tbody tr").all():
        name = row.locator("td").first.locator(".mono").inner_text().strip()
        header = page.locator("[data-testid=upcoming-pools] thead th").all_inner_texts()
        fires = row.locator("td").nth([h.strip() for h in header].index("Fires 24 h")).inner_text()
        rows[name] = int(fires.replace(",", ""))
    return rows


def _ticks(page) -> list[dict]:
    """The time axis' labels: where each is drawn, beside the chart's edges."""
    return page.evaluate(
        """() => {
          const chart = document.querySelector("[data-testid=upcoming-chart]").getBoundingClientRect();
          return [...document.querySelectorAll("[data-testid=upcoming-ticks] span")].map((span) => {
            const r = span.getBoundingClientRect();
            return {text: span.innerText, top: Math.round(r.top), left: r.left, right: r.right,
                    chart_left: chart.left, chart_right: chart.right};
          });
        }"""
    )


def _fits(page, selector: str) -> dict:
    """How far the table inside `selector` reaches past its card's right edge, and past its own
    scrolling box (which would hide columns behind a sideways scroll)."""
    return page.evaluate(
        """(selector) => {
          const card = document.querySelector(selector);
          const table = card.querySelector("table");
          const wrap = table.closest(".table-wrap");
          return {
            past_card: Math.round(table.getBoundingClientRect().right - card.getBoundingClientRect().right),
            hidden: wrap.scrollWidth - wrap.clientWidth,
            document: document.documentElement.scrollWidth - window.innerWidth,
          };
        }""",
        selector,
    )


def test_upcoming_counts_every_fire_of_the_day_and_each_steps_pool(stack, browser, transactional_db):
    """An every-minute job and an hourly workflow (step `extract` in pool etl, step `load` in
    default): all 97 buckets have bars (but the first, mostly past, when the page is drawn in its
    last minute), each full one holding its 15 minutes' fires (16 where the workflow fires too),
    through the last; the total is the bars' sum, with no "lower bound" +; the Pools table names
    etl and default (never a blank pool), counts the workflow's fires in both, and fits its card
    at both sizes."""
    from executions.clock import db_now
    from scheduling.job_creation import job_create
    from tenants.services import tenant_create

    acme = tenant_create(slug="acme")
    _user("olivia", staff=True)
    now = db_now()
    base = {"tenant": acme, "now": now}
    job_create(
        fields={"name": "heartbeat", "type": "CRON", "schedule": "* * * * *", "pool": "default", "handler": "noop"},
        **base,
    )
    steps = [
        {"name": "extract", "target": {"pool": "etl", "handler": "noop"}, "payload": {}, "depends_on": []},
        {"name": "load", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["extract"]},
    ]
    job_create(
        fields={
            "name": "hourly etl",
            "type": "CRON",
            "schedule": "0 * * * *",
            "pool": "",
            "handler": "",
            "workflow": {"steps": steps},
        },
        **base,
    )

    for label, viewport in (("wide", WIDE), ("narrow", NARROW)):
        page = _page(browser, stack, "olivia", viewport=viewport)
        page.goto(f"{stack.base}/dashboard/upcoming/")
        page.screenshot(path=str(SCREENSHOTS / f"upcoming-day-{label}.png"), full_page=True)

        bars = _bars(page)
        drawn = page.eval_on_selector_all(
            "[data-testid=upcoming-chart] a[data-bucket]", "links => links.map((a) => Number(a.dataset.bucket))"
        )
        # Every bucket has its bar, through the last (the 97th). The first, mostly past, has none
        # when the page is drawn in a bucket's last minute: the every-minute job's next fire is the
        # next minute, in the next bucket.
        assert drawn[0] in (0, 1) and drawn == list(range(drawn[0], 97)), f"bars for buckets {drawn}"
        assert len(bars) == len(drawn), bars
        for start, minute, count in bars[1:]:  # the first bucket began before now: partly past
            assert count == 15 + (minute == 0), (start, count)
        total = int(page.inner_text("[data-testid=upcoming-total]").strip().replace(",", ""))
        assert total == sum(count for _, _, count in bars), total
        assert page.locator("[data-testid=upcoming-truncated]").count() == 0

        pools = _pool_fires(page)
        assert "" not in pools and set(pools) >= {"etl", "default"}, pools
        hourly = sum(1 for _, minute, _ in bars[1:] if minute == 0)
        assert pools["etl"] in (hourly, hourly + 1), pools  # the first bucket's own hour may have fired
        # Every fire of the every-minute job, and the `load` step of each of the workflow's.
        assert pools["default"] == total, pools
        ticks = _ticks(page)
        assert len(ticks) >= 7 and len({tick["top"] for tick in ticks}) == 1, ticks  # one row, every 3 h
        midnight = [tick["text"].split("\n") for tick in ticks if tick["text"].startswith("00:00")]
        assert all(len(lines) == 2 and lines[1] for lines in midnight), midnight  # with its date
        assert all(a["right"] < b["left"] for a, b in itertools.pairwise(ticks)), ticks  # none overlaps the next
        assert ticks[0]["left"] >= ticks[0]["chart_left"] and ticks[-1]["right"] <= ticks[-1]["chart_right"], ticks
        # The busiest bucket is an hour's first, where the workflow fires: it names both pools.
        workflow_row = page.locator("[data-testid=upcoming-bucket] tbody tr", has_text="hourly etl")
        assert "etl, default" in workflow_row.inner_text()
        fit = _fits(page, "[data-testid=upcoming-pools]")
        assert fit == {"past_card": fit["past_card"], "hidden": 0, "document": 0} and fit["past_card"] <= 0, fit
        page.context.close()
