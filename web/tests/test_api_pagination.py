"""Cursor pages over rows that share their list's order key: a bulk create stamps all its jobs
with one `created_at`, and a midnight herd schedules thousands of executions for one instant.
Every page of such a list holds rows no other page holds, forwards and backwards, however many
tie, and a row that changes between two page requests neither repeats nor goes missing."""

from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest
from django.db.models import F
from django.utils import timezone

from executions.models import Execution
from jobs.models import Job
from web.tests.test_api_jobs import once_body

pytestmark = pytest.mark.django_db

# More than DRF's offset cutoff (1,000) plus a page: a cursor that counted its way past ties
# could not reach the rows beyond it.
TIED = 1_700
PAGE = 500


def create_tied(api) -> None:
    """TIED one-off jobs due at one instant, in two bulk requests (each stamps one created_at)."""
    for start in range(0, TIED, 850):
        items = [once_body(name=f"job {index}") for index in range(start, min(start + 850, TIED))]
        response = api.post("/v1/jobs/bulk", {"jobs": items}, format="json")
        assert response.status_code == 201, response.content


def walk(api, url: str, key: str, *, link: str = "next", rows: int = TIED) -> list[list[str]]:
    """The ids of each page, following `link` from `url` until it is null."""
    pages = []
    while url:
        response = api.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        pages.append([row[key] for row in body["results"]])
        url = body[link]
        assert len(pages) <= rows // len(pages[0] or [None]) + 2, "the links go round in a circle"
    return pages


def cursor_of(url: str) -> str:
    return parse_qs(urlparse(url).query)["cursor"][0]


@pytest.mark.parametrize(
    ("path", "key"),
    [("/v1/executions", "executionId"), ("/v1/jobs", "jobId")],
)
def test_rows_that_tie_on_the_order_key_are_each_on_exactly_one_page(api, tenant, path, key):
    create_tied(api)

    pages = walk(api, f"{path}?pageSize={PAGE}", key)

    seen = [row for page in pages for row in page]
    assert len(seen) == len(set(seen)) == TIED
    assert [len(page) for page in pages] == [PAGE, PAGE, PAGE, TIED - 3 * PAGE]
    # And back from the last page, by `previous`: the same pages in reverse.
    last = api.get(f"{path}?pageSize={PAGE}").json()
    while last["next"]:
        url, last = last["next"], api.get(last["next"]).json()
    back = walk(api, url, key, link="previous")
    assert back == pages[::-1]


def test_a_job_s_executions_page_past_ties_too(api, tenant, make_job):
    """A job's own list orders by scheduledFor as the tenant's does; here its runs tie (made by
    hand: a job has one execution per fire, so ties are a retry's or a workflow's)."""
    job = make_job(tenant, type="CRON", schedule="0 0 * * *")
    first = Execution.objects.get(job=job)
    Execution.objects.bulk_create(
        Execution(
            job=job,
            tenant=tenant,
            pool=first.pool,
            scheduled_for=first.scheduled_for,
            available_at=first.available_at,
            origin="TRIGGER",
            state="SUCCEEDED",
            history_derived=True,
        )
        for _ in range(PAGE * 2 + 5)
    )

    pages = walk(api, f"/v1/jobs/{job.pk}/executions?pageSize={PAGE}", "executionId")

    seen = [row for page in pages for row in page]
    assert len(seen) == len(set(seen)) == PAGE * 2 + 6


def test_a_row_that_changes_between_pages_is_neither_repeated_nor_lost(api, tenant):
    """Rows that tie are in id order, which no update changes: the rows of the first page
    moving on (as a claim moves them) does not shift the second page."""
    create_tied(api)
    first = api.get(f"/v1/executions?pageSize={PAGE}").json()
    # A new version of each row (available_at is indexed: no HOT update), where a scan finds
    # them in another order than before; and some of those still to come cancelled.
    Execution.objects.update(available_at=F("available_at") + timedelta(seconds=1))
    Execution.objects.filter(id__in=Execution.objects.order_by("?").values("id")[:300]).update(
        state="CANCELLED", finished_at=timezone.now()
    )

    rest = walk(api, first["next"], "executionId")

    seen = [row["executionId"] for row in first["results"]] + [row for page in rest for row in page]
    assert len(seen) == len(set(seen)) == TIED


def test_a_cursor_that_was_tampered_with_is_404(api, tenant):
    create_tied(api)
    following = api.get(f"/v1/jobs?pageSize={PAGE}").json()["next"]
    cursor = cursor_of(following)

    for bad in ("not base64!", cursor[:-4] + "AAAA", "cD0yMDI2LTExLTI5"):  # the last: p=2026-11-29, no id
        response = api.get("/v1/jobs", {"cursor": bad, "pageSize": PAGE})
        assert response.status_code == 404, (bad, response.content)
    assert Job.objects.count() == TIED


@pytest.mark.parametrize("query", ["", "&state=SUCCEEDED&state=DEAD&state=PENDING", "&state=FAILED"])
def test_a_list_over_several_states_is_one_order_across_them(api, tenant, make_job, other_tenant, query):
    """On PostgreSQL the tenant's list is read state by state and merged (no index orders it across
    states): the pages are still the one order, newest scheduled first, ties by id."""
    now = timezone.now()
    states = ["PENDING", "SUCCEEDED", "DEAD", "FAILED", "CANCELLED"]
    for index in range(25):
        make_job(tenant, run_at=now + timedelta(minutes=index % 7))
        make_job(other_tenant, run_at=now + timedelta(minutes=index % 5))
    for index, execution in enumerate(Execution.objects.filter(tenant=tenant).order_by("id")):
        state = states[index % len(states)]
        finished = {} if state == "PENDING" else {"finished_at": now}
        Execution.objects.filter(pk=execution.pk).update(state=state, **finished)
    wanted = [s for s in states if f"state={s}" in query] or states
    expected = [
        str(pk)
        for pk in Execution.objects.filter(tenant=tenant, state__in=wanted)
        .order_by("-scheduled_for", "-id")
        .values_list("id", flat=True)
    ]

    pages = walk(api, f"/v1/executions?pageSize=4{query}", "executionId", rows=25)

    assert [row for page in pages for row in page] == expected
