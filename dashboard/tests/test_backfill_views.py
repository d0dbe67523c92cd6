"""The job page shows the job's backfills with their progress: runs ended of the fires, those
running, waiting to be released, skipped. On a recurring job's page its Backfill form answers with
the dry run and starts the backfill; a RUNNING backfill's row cancels it; both audited, both
scoped to the caller's tenants (another's job or backfill: 404)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from audit.models import ActorKind
from dashboard.models import AuditEntry
from executions.models import Backfill, Execution, Origin
from executions.states import ExecutionState as S
from scheduling.backfills import backfill_cancel, backfill_create, backfill_release

pytestmark = pytest.mark.django_db


def test_the_job_page_shows_a_backfills_progress(member_client: Client, tenant, make_job, drive):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    backfill = backfill_create(
        job=job,
        start=datetime(2026, 3, 1, tzinfo=UTC),
        end=datetime(2026, 3, 1, 4, tzinfo=UTC),
        order="OLDEST_FIRST",
        reprocess="NONE",
        max_concurrent=2,
        now=timezone.now(),
    )
    backfill_release(now=timezone.now(), limit=500)
    drive(Execution.objects.filter(origin=Origin.BACKFILL).order_by("scheduled_for").first(), S.SUCCEEDED)

    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    assert 'data-testid="job-backfills"' in page
    assert f'data-backfill="{backfill.pk}"' in page
    assert "1/4" in page  # one run ended of four fires
    assert "RUNNING" in page


def test_a_job_without_backfills_shows_no_panel(member_client: Client, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    assert 'data-testid="job-backfills"' not in member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()


# --- Starting and cancelling a backfill from the job's page ----------------------------------------------

HOUR = timedelta(hours=1)


def _range(hours: int = 4) -> tuple[datetime, datetime]:
    """A past range of whole hours, ending at least an hour ago."""
    end = timezone.now().replace(minute=0, second=0, microsecond=0) - HOUR
    return end - hours * HOUR, end


def _wall(at: datetime) -> str:
    """As a datetime-local input sends it: UTC, no offset."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def _form(range_from: datetime, range_to: datetime, **more) -> dict:
    fields = {"from": _wall(range_from), "to": _wall(range_to), "order": "OLDEST_FIRST", "reprocess": "NONE"}
    return fields | {"maxConcurrent": "2"} | more


def _path(job) -> str:
    return f"/dashboard/jobs/{job.pk}/backfill"


def test_a_recurring_jobs_page_offers_the_backfill_form_and_a_one_off_jobs_does_not(member_client, tenant, make_job):
    cron = make_job(tenant, type="CRON", schedule="0 * * * *")
    interval = make_job(tenant, type="INTERVAL", every_sec=600)
    once = make_job(tenant)
    for job in (cron, interval):
        page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
        assert 'data-testid="backfill-form"' in page and f'action="{_path(job)}"' in page
        assert 'type="datetime-local" name="from"' in page and 'name="maxConcurrent"' in page
    assert 'data-testid="backfill-form"' not in member_client.get(f"/dashboard/jobs/{once.pk}/").content.decode()


def test_a_cancelled_jobs_page_offers_no_backfill_form(member_client, tenant, make_job):
    from scheduling.job_changes import job_cancel

    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    job_cancel(job=job, now=timezone.now())
    assert 'data-testid="backfill-form"' not in member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()


def test_submitting_the_form_answers_the_dry_run_and_writes_nothing(member_client, tenant, make_job, drive):
    """The plan is the API's dry run (backfill_plan): each fire with what it would do; a fire
    that has a run is skipped. No backfill, no audit row; the "Start backfill" form carries the
    same values."""
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    start, end = _range(4)
    existing = backfill_create(
        job=job,
        start=start,
        end=start + HOUR,
        order="OLDEST_FIRST",
        reprocess="NONE",
        max_concurrent=1,
        now=timezone.now(),
    )
    backfill_release(now=timezone.now(), limit=10)
    drive(Execution.objects.get(origin=Origin.BACKFILL), S.SUCCEEDED)

    response = member_client.post(_path(job), _form(start, end))
    page = response.content.decode()
    assert response.status_code == 200
    assert "4 fires</strong> in the range: 3 to run, 0 to run again, 1 skipped" in page
    assert page.count('<tr data-action="RUN">') == 3 and page.count('<tr data-action="SKIP">') == 1
    assert "exists: its run succeeded" in page
    assert 'data-testid="backfill-start"' in page and f'value="{_wall(start)}"' in page
    assert 'data-testid="backfill-plan-more"' not in page
    assert list(Backfill.objects.all()) == [existing]
    assert not AuditEntry.objects.filter(action="backfill.create").exists()


def test_the_dry_run_shows_the_first_fifty_fires_and_counts_the_rest(member_client, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="* * * * *")
    start, end = _range(2)
    page = member_client.post(_path(job), _form(start, end, order="NEWEST_FIRST")).content.decode()
    assert "120 fires</strong> in the range: 120 to run" in page
    assert page.count('<tr data-action="RUN">') == 50
    assert "and 70 more" in page
    newest, fiftieth = ((end - timedelta(minutes=n)).strftime("%Y-%m-%d %H:%M:%SZ") for n in (1, 50))
    assert page.index(newest) < page.index(fiftieth)  # newest first
    assert start.strftime("%Y-%m-%d %H:%M:%SZ") not in page.split('data-testid="backfill-plan"')[1]


def test_start_backfill_makes_it_audits_it_and_the_job_page_lists_it(member_client, member, tenant, make_job):
    job = make_job(tenant, type="INTERVAL", every_sec=3600, start_at=datetime(2026, 1, 1, tzinfo=UTC))
    start, end = _range(3)
    response = member_client.post(_path(job), _form(start, end, reprocess="ALL", start="1"))
    assert response.status_code == 302 and response["Location"] == f"/dashboard/jobs/{job.pk}/#job-backfills"

    backfill = Backfill.objects.get(job=job)
    assert (backfill.range_from, backfill.range_to) == (start, end)
    assert (backfill.order, backfill.reprocess, backfill.max_concurrent, backfill.state) == (
        "OLDEST_FIRST",
        "ALL",
        2,
        "RUNNING",
    )
    entry = AuditEntry.objects.get(action="backfill.create")
    assert (entry.outcome, entry.target_type, entry.target_id, entry.actor_id) == ("OK", "job", str(job.pk), member.pk)
    assert entry.detail == f"backfill {backfill.pk}: 3 fires, 0 skipped"

    page = member_client.get(response["Location"]).content.decode()
    assert f"backfill {str(backfill.pk)[:8]} started: 3 fire(s) to run, 0 skipped" in page
    assert f'data-backfill="{backfill.pk}"' in page and 'data-action="cancel-backfill"' in page


def _api_errors(api, job, body: dict) -> dict:
    response = api.post(f"/v1/jobs/{job.pk}/backfill", body | {"dryRun": True}, format="json")
    assert response.status_code == 400, response.content
    return {name: value for name, value in response.json().items() if name not in ("code", "detail")}


@pytest.mark.parametrize(
    ("case", "field"),
    [
        ("from after to", "to"),
        ("to in the future", "to"),
        ("over 10,000 fires", "to"),
        ("no from", "from"),
        ("none at once", "maxConcurrent"),
        ("a one-off job", "type"),
    ],
)
def test_what_the_api_refuses_is_an_error_on_its_field_with_the_apis_message(
    case, field, member_client, api, tenant, make_job
):
    """Each refusal names the field, in the API's words (the form is validated by its serializer
    and planned by its service), changes nothing and is audited INVALID."""
    job = make_job(
        tenant,
        **({"run_at": timezone.now() + HOUR} if case == "a one-off job" else {"type": "CRON", "schedule": "* * * * *"}),
    )
    start, end = _range(2)
    form = {
        "from after to": _form(end, start),
        "to in the future": _form(start, timezone.now() + HOUR),
        "over 10,000 fires": _form(start - timedelta(days=8), end),
        "no from": _form(start, end, **{"from": ""}),
        "none at once": _form(start, end, maxConcurrent="0"),
        "a one-off job": _form(start, end),
    }[case]
    body = {name: f"{value}Z" if name in ("from", "to") and value else value for name, value in form.items() if value}
    expected = _api_errors(api, job, body)
    assert list(expected) == [field]

    for confirmed in ({}, {"start": "1"}):
        page = member_client.post(_path(job), form | confirmed).content.decode()
        assert f'data-error-for="{field}"' in page, case
        for message in expected[field]:
            assert escape(message) in page, (case, message)
        assert 'data-testid="backfill-plan"' not in page
    assert not Backfill.objects.exists()
    rows = AuditEntry.objects.filter(action="backfill.create", actor_kind=ActorKind.DASHBOARD)
    assert [row.outcome for row in rows] == ["INVALID", "INVALID"]
    assert all(row.target_id == str(job.pk) and field in row.detail for row in rows)


def test_a_cancelled_jobs_backfill_is_refused_and_audited(member_client, tenant, make_job):
    from scheduling.job_changes import job_cancel

    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    job_cancel(job=job, now=timezone.now())
    page = member_client.post(_path(job), _form(*_range(2), start="1")).content.decode()
    assert "the job is cancelled; it runs no more" in page
    assert not Backfill.objects.exists()
    assert AuditEntry.objects.get(action="backfill.create").outcome == "REFUSED"


def _running_backfill(job) -> Backfill:
    start, end = _range(4)
    backfill = backfill_create(
        job=job, start=start, end=end, order="OLDEST_FIRST", reprocess="NONE", max_concurrent=1, now=timezone.now()
    )
    backfill_release(now=timezone.now(), limit=10)
    return backfill


def test_cancel_on_a_running_backfills_row_cancels_it_and_audits_it(member_client, member, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    backfill = _running_backfill(job)
    released = Execution.objects.get(origin=Origin.BACKFILL)
    here = f"/dashboard/jobs/{job.pk}/"
    page = member_client.get(here).content.decode()
    assert f'action="/dashboard/backfills/{backfill.pk}/cancel"' in page and "data-confirm=" in page

    response = member_client.post(f"/dashboard/backfills/{backfill.pk}/cancel", {"next": here + "#job-backfills"})
    assert response.status_code == 302 and response["Location"] == here + "#job-backfills"
    backfill.refresh_from_db()
    released.refresh_from_db()
    assert backfill.state == "CANCELLED" and released.state == S.CANCELLED
    entry = AuditEntry.objects.get(action="backfill.cancel")
    assert (entry.outcome, entry.target_type, entry.target_id, entry.job_id, entry.actor_id) == (
        "OK",
        "backfill",
        str(backfill.pk),
        job.pk,
        member.pk,
    )
    page = member_client.get(here).content.decode()
    assert f"backfill {str(backfill.pk)[:8]} cancelled" in page
    assert 'data-action="cancel-backfill"' not in page  # an ended backfill has no Cancel


def test_cancel_of_an_ended_backfill_is_refused_with_a_message_and_audited(member_client, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    backfill = _running_backfill(job)
    backfill_cancel(backfill=backfill, now=timezone.now(), reason="by the API")

    response = member_client.post(f"/dashboard/backfills/{backfill.pk}/cancel", follow=True)
    page = response.content.decode()
    assert f"cancel of backfill {str(backfill.pk)[:8]} refused — the backfill has ended (CANCELLED)" in page
    entry = AuditEntry.objects.get(action="backfill.cancel")
    assert entry.outcome == "REFUSED" and "has ended" in entry.detail


def test_another_tenants_job_and_backfill_answer_404_audited_not_found(
    member_client, staff_client, make_user, other_tenant, make_job
):
    theirs = make_job(other_tenant, type="CRON", schedule="0 * * * *")
    backfill = _running_backfill(theirs)
    nobody = Client()
    nobody.force_login(make_user("eve"))  # a member of no tenant
    for client in (member_client, nobody):
        assert client.get(_path(theirs)).status_code == 404
        assert client.post(_path(theirs), _form(*_range(2))).status_code == 404
        assert client.post(_path(theirs), _form(*_range(2), start="1")).status_code == 404
        assert client.post(f"/dashboard/backfills/{backfill.pk}/cancel").status_code == 404
    assert Backfill.objects.get().state == "RUNNING"
    assert {(row.action, row.outcome, row.tenant_id) for row in AuditEntry.objects.all()} == {
        ("backfill.create", "NOT_FOUND", None),
        ("backfill.cancel", "NOT_FOUND", None),
    }
    # Staff see every tenant: the same requests act.
    assert staff_client.post(f"/dashboard/backfills/{backfill.pk}/cancel").status_code == 302
    assert staff_client.post(_path(theirs), _form(*_range(2), start="1")).status_code == 302
    assert Backfill.objects.filter(job=theirs).count() == 2


def test_signed_out_the_backfill_urls_ask_for_a_login(client, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    backfill = _running_backfill(job)
    for response in (
        client.post(_path(job), _form(*_range(2), start="1")),
        client.post(f"/dashboard/backfills/{backfill.pk}/cancel"),
    ):
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert Backfill.objects.get().state == "RUNNING"
