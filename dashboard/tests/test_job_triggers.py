"""What makes a job fire, on its page and in the jobs list (issue 31, item 9): an EVENT job says
`on invoice.paid where {currency: "EUR"}` on both (it said "Schedule: once at —" on its page and
nothing in the list); a workflow job names its steps' pools (the list showed " · "); cron,
one-off and delayed jobs say their schedule, time or delay."""

from datetime import UTC, datetime

import pytest
from django.utils import timezone
from django.utils.html import escape

from scheduling.job_changes import job_pause
from scheduling.job_creation import job_create


def _make(tenant, **fields):
    fields.setdefault("pool", "default")
    fields.setdefault("handler", "noop")
    return job_create(tenant=tenant, fields=fields, now=timezone.now()).job


@pytest.fixture
def jobs(db, tenant):
    steps = [
        {"name": "extract", "target": {"pool": "etl", "handler": "noop"}, "payload": {}, "depends_on": []},
        {"name": "load", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["extract"]},
    ]
    return {
        "event": _make(
            tenant, name="on paid", type="EVENT", event_name="invoice.paid", event_filter={"currency": "EUR"}
        ),
        "any event": _make(tenant, name="on refund", type="EVENT", event_name="invoice.refunded"),
        "workflow": _make(
            tenant,
            name="etl",
            type="CRON",
            schedule="0 2 * * *",
            timezone="Europe/Paris",
            pool="",
            handler="",
            workflow={"steps": steps},
        ),
        "cron": _make(tenant, name="rollup", type="CRON", schedule="*/5 * * * *", timezone="America/New_York"),
        "once": _make(tenant, name="one-off", type="ONCE", run_at=datetime(2027, 3, 14, 9, tzinfo=UTC)),
        "delayed": _make(tenant, name="later", type="DELAYED", delay_sec=90),
        "interval": _make(
            tenant, name="poll", type="INTERVAL", every_sec=3725, start_at=datetime(2027, 3, 14, 9, tzinfo=UTC)
        ),
    }


def _row(html: str, job) -> str:
    start = html.index(f'<tr data-job="{job.pk}">')
    return html[start : html.index("</tr>", start)]


@pytest.mark.django_db
def test_an_event_jobs_page_says_what_it_fires_on(member_client, jobs):
    html = member_client.get(f"/dashboard/jobs/{jobs['event'].pk}/").content.decode()
    assert "once at" not in html
    assert "<dt>Trigger</dt>" in html
    assert 'on <code class="mono trigger-code" data-testid="job-event">invoice.paid</code> where' in html
    assert "{currency: &quot;EUR&quot;}" in html
    assert "No schedule: it fires once for each event that matches" in html
    plain = member_client.get(f"/dashboard/jobs/{jobs['any event'].pk}/").content.decode()
    assert 'data-testid="job-event">invoice.refunded</code></dd>' in plain  # no filter: no "where"


@pytest.mark.django_db
def test_a_paused_event_jobs_page_still_answers(member_client, jobs):
    job_pause(job=jobs["event"], now=timezone.now())
    response = member_client.get(f"/dashboard/jobs/{jobs['event'].pk}/")
    assert response.status_code == 200 and "invoice.paid" in response.content.decode()


@pytest.mark.django_db
def test_the_jobs_list_shows_each_jobs_trigger_and_target(member_client, jobs):
    html = member_client.get("/dashboard/jobs/").content.decode()
    event = _row(html, jobs["event"])
    assert "invoice.paid" in event and "{currency: &quot;EUR&quot;}" in event and "noop" in event
    workflow = _row(html, jobs["workflow"])
    assert "workflow of 2 steps" in workflow and ">etl<" in workflow and ">default<" in workflow
    assert "0 2 * * *" in workflow and "in Europe/Paris" in workflow
    assert "*/5 * * * *" in _row(html, jobs["cron"]) and "in America/New_York" in _row(html, jobs["cron"])
    assert "once at" in _row(html, jobs["once"]) and "2027-03-14 09:00:00Z" in _row(html, jobs["once"])
    assert "1 min 30 s after creation" in _row(html, jobs["delayed"])
    # An interval's period in full (a cut would misstate it), from its anchor.
    interval = _row(html, jobs["interval"])
    assert ">1 h 2 min 5 s</span>" in interval and "2027-03-14 09:00:00Z" in interval


@pytest.mark.django_db
def test_an_interval_jobs_page_says_its_period_and_next_fires(member_client, jobs):
    html = member_client.get(f"/dashboard/jobs/{jobs['interval'].pk}/").content.decode()
    assert 'every <span class="trigger-code" data-testid="job-interval" title="3725 s">1 h 2 min 5 s</span>' in html
    assert "once at" not in html
    assert "2027-03-14 10:02:05" in html  # the second fire, in the next fires panel


@pytest.mark.django_db
def test_a_long_filter_is_cut_in_the_list_and_whole_on_the_page(member_client, tenant):
    job = _make(tenant, type="EVENT", event_name="order.placed", event_filter={f"k{i}": "x" * 10 for i in range(9)})
    from dashboard.templatetags.triggers import LIST_FILTER_CHARS, filter_text

    whole = filter_text(job.event_filter)
    row = _row(member_client.get("/dashboard/jobs/").content.decode(), job)
    assert f'title="{escape(whole)}">{escape(whole[: LIST_FILTER_CHARS - 1])}…</code>' in row
    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    assert f">{escape(whole)}</code>" in page


def test_a_filters_values_are_json_and_its_plain_keys_bare():
    """ "1" and 1 are different filters (events.matching.json_equal), so strings keep their quotes."""
    from dashboard.templatetags.triggers import filter_text

    assert filter_text({"currency": "EUR", "amount": 1, "vip": True, "tier": None}) == (
        '{currency: "EUR", amount: 1, vip: true, tier: null}'
    )
    assert filter_text({"a key": "1", "nested": {"x": [1, 2]}}) == '{"a key": "1", nested: {"x": [1, 2]}}'
    assert filter_text({"ville": "Zürich"}) == '{ville: "Zürich"}'


@pytest.mark.django_db
def test_a_debounced_event_job_says_its_window_on_its_page_and_in_the_list(member_client, tenant):
    job = _make(tenant, name="reindex", type="EVENT", event_name="doc.changed", debounce_sec=3, debounce_max_sec=90)
    bare = _make(tenant, name="quiet only", type="EVENT", event_name="doc.saved", debounce_sec=120)

    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    listed = member_client.get("/dashboard/jobs/").content.decode()

    said = '<span class="muted" data-testid="job-debounce">, once quiet for 3 s (at most 1 min 30 s)</span>'
    assert said in page and said in _row(listed, job)
    assert ", once quiet for 2 min</span>" in _row(listed, bare)
