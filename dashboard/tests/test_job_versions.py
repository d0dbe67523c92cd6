"""The job page's versions: the history, the diff of a chosen version, and its restore (a POST
with CSRF that calls the API's restore and is audited), scoped to the caller's tenants."""

import pytest
from django.test import Client

from dashboard.models import AuditEntry
from jobs import registry
from jobs.models import Job, JobVersion

pytestmark = pytest.mark.django_db


def _edit(client, job, **changes):
    form = client.get(f"/dashboard/jobs/{job.pk}/edit").context["values"]
    response = client.post(f"/dashboard/jobs/{job.pk}/edit", {**form, **changes})
    assert response.status_code == 302, response.context and response.context.get("errors")


def _restore_path(job, number: int) -> str:
    return f"/dashboard/jobs/{job.pk}/versions/{number}/restore"


def test_an_edit_records_a_version_by_the_dashboard_user_and_the_page_lists_it(member_client, tenant, make_job):
    """The history shows each version's number, time, author and changed fields, newest first."""
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    _edit(member_client, job, schedule="*/10 * * * *", name="every ten")

    page = member_client.get(f"/dashboard/jobs/{job.pk}/")

    v2 = JobVersion.objects.get(job=job, number=2)
    assert v2.actor == "dashboard ada"
    assert [c["field"] for c in v2.changes] == ["name", "schedule"]
    html = page.content.decode()
    start = html.index('data-testid="job-versions"')
    table = html[start : html.index("</table>", start)]
    assert table.index('data-version="2"') < table.index('data-version="1"')
    assert "dashboard ada" in table and "name, schedule" in table
    assert [v.number for v in page.context["versions"]] == [2, 1]


def test_a_chosen_version_shows_its_changes_and_what_a_restore_would_change(member_client, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    _edit(member_client, job, schedule="*/10 * * * *")

    page = member_client.get(f"/dashboard/jobs/{job.pk}/?version=1")
    latest = member_client.get(f"/dashboard/jobs/{job.pk}/")

    assert page.context["version_chosen"].number == 1
    assert page.context["restore_changes"] == [{"field": "schedule", "from": "*/10 * * * *", "to": "0 * * * *"}]
    html = page.content.decode()
    assert 'data-testid="restore-preview"' in html
    assert f'action="{_restore_path(job, 1)}"' in html and "data-confirm=" in html
    # The latest version is the current definition: its diff is shown, nothing to restore.
    assert latest.context["version_chosen"].number == 2
    assert "&quot;*/10 * * * *&quot;" in latest.content.decode()
    assert 'data-action="restore"' not in latest.content.decode()


def test_restore_from_the_page_makes_version_n_current_and_re_times_the_pending_run(member_client, tenant, make_job):
    """The restore goes through the API's service: the definition is version 1's, version 3 is
    recorded by the dashboard user, the pending run is back on the hour, and it is audited."""
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    _edit(member_client, job, schedule="*/10 * * * *")

    response = member_client.post(_restore_path(job, 1), follow=True)

    assert response.status_code == 200
    assert "version 1 restored" in response.content.decode()
    job.refresh_from_db()
    assert job.schedule == "0 * * * *"
    pending = job.executions.get(state="PENDING")
    assert pending.scheduled_for == job.next_fire_at and pending.scheduled_for.minute == 0
    v3 = JobVersion.objects.get(job=job, number=3)
    assert (v3.actor, v3.definition) == ("dashboard ada", JobVersion.objects.get(job=job, number=1).definition)
    entry = AuditEntry.objects.filter(action="job.restore").get()
    assert (entry.outcome, entry.detail, entry.actor) == ("OK", "restored version 1", "ada")


def test_restore_needs_the_csrf_token(member, member_client, tenant, make_job):
    """A cross-site POST (no token) is refused with 403 and restores nothing; the token the page
    carries is what the restore needs."""
    job = make_job(tenant, name="a")
    _edit(member_client, job, name="b")
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)

    refused = client.post(_restore_path(job, 1))
    page = client.get(f"/dashboard/jobs/{job.pk}/?version=1").content.decode()
    form = page[page.index(f'action="{_restore_path(job, 1)}"') :]
    marker = 'name="csrfmiddlewaretoken" value="'
    token = form[form.index(marker) + len(marker) :].split('"', 1)[0]
    name_after_refusal = Job.objects.get(pk=job.pk).name
    accepted = client.post(_restore_path(job, 1), {"csrfmiddlewaretoken": token})

    assert refused.status_code == 403
    assert name_after_refusal == "b"
    assert accepted.status_code == 302
    assert Job.objects.get(pk=job.pk).name == "a"


def test_another_tenants_versions_are_404_and_their_restore_is_audited_not_found(
    member_client, other_tenant, make_job, staff_client
):
    theirs = make_job(other_tenant, name="theirs")
    _edit(staff_client, theirs, name="renamed")

    assert member_client.get(f"/dashboard/jobs/{theirs.pk}/?version=1").status_code == 404
    assert member_client.post(_restore_path(theirs, 1)).status_code == 404
    assert Job.objects.get(pk=theirs.pk).name == "renamed"
    assert JobVersion.objects.filter(job=theirs).count() == 2
    entry = AuditEntry.objects.get(action="job.restore")
    assert (entry.outcome, entry.tenant_id) == ("NOT_FOUND", None)


def test_restore_of_an_unknown_version_is_404(member_client, tenant, make_job):
    job = make_job(tenant)

    assert member_client.post(_restore_path(job, 7)).status_code == 404


def test_a_version_that_no_longer_validates_is_refused_and_audited_invalid(
    member_client, tenant, make_job, monkeypatch
):
    job = make_job(tenant, handler="noop")
    _edit(member_client, job, handler="sleep", payload='{"seconds": 1}')
    real_get = registry.get
    monkeypatch.setattr(registry, "get", lambda name: None if name == "noop" else real_get(name))

    response = member_client.post(_restore_path(job, 1), follow=True)

    assert "restore of version 1 refused" in response.content.decode()
    assert "unknown handler" in response.content.decode()
    assert Job.objects.get(pk=job.pk).handler == "sleep"
    assert JobVersion.objects.filter(job=job).count() == 2
    entry = AuditEntry.objects.get(action="job.restore")
    assert entry.outcome == "INVALID" and "handler" in entry.detail


def test_a_cancelled_job_offers_no_restore_and_refuses_one(member_client, tenant, make_job):
    job = make_job(tenant, name="a")
    _edit(member_client, job, name="b")
    member_client.post(f"/dashboard/jobs/{job.pk}/cancel")

    page = member_client.get(f"/dashboard/jobs/{job.pk}/?version=1")
    response = member_client.post(_restore_path(job, 1), follow=True)

    assert 'data-action="restore"' not in page.content.decode()
    assert "restore of version 1 refused" in response.content.decode()
    assert Job.objects.get(pk=job.pk).name == "b"
    assert AuditEntry.objects.get(action="job.restore").outcome == "REFUSED"
