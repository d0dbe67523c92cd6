"""The jobs page's bulk Pause / Resume / Cancel of selected jobs, through the Django test client:
each job goes through the same service as its own action, jobs in the wrong state are skipped and
counted, another tenant's jobs are out of reach, and the form needs its CSRF token."""

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from jobs.models import Job
from scheduling.job_changes import job_cancel, job_pause

pytestmark = pytest.mark.django_db

URL = "/dashboard/jobs/bulk"


def states(*jobs) -> list[str]:
    return [Job.objects.get(pk=job.pk).state for job in jobs]


def ids(*jobs) -> list[str]:
    return [str(job.pk) for job in jobs]


def pause(job) -> None:
    job_pause(job=job, now=timezone.now())


def cancel(job) -> None:
    job_cancel(job=job, now=timezone.now())


def test_the_jobs_page_has_a_checkbox_for_each_job_an_action_applies_to(member_client, tenant, make_job):
    """ACTIVE and PAUSED jobs are selectable for the bulk form; finished ones are not."""
    active, paused, cancelled = make_job(tenant), make_job(tenant), make_job(tenant)
    pause(paused)
    cancel(cancelled)

    html = member_client.get("/dashboard/jobs/").content.decode()

    assert f'action="{URL}"' in html
    assert 'name="csrfmiddlewaretoken"' in html
    for selectable in (active, paused):
        assert f'name="ids" value="{selectable.pk}" form="bulk-jobs"' in html
    assert f'name="ids" value="{cancelled.pk}"' not in html
    for action in ("pause", "resume", "cancel"):
        assert f'name="action" value="{action}"' in html


def test_pause_selected_pauses_the_active_ones_and_skips_the_rest(member_client, tenant, make_job):
    """Three active jobs are paused; a paused one is skipped; the message says how many of each;
    each pause is audited, all under one request id."""
    active = [make_job(tenant, type="CRON", schedule="0 * * * *") for _ in range(3)]
    paused = make_job(tenant)
    pause(paused)

    response = member_client.post(URL, {"action": "pause", "ids": ids(*active, paused)}, follow=True)

    assert response.redirect_chain[-1][0] == "/dashboard/jobs/"
    assert states(*active, paused) == ["PAUSED"] * 4
    assert "Paused 3 job(s); skipped 1 not in a state to pause." in response.content.decode()
    entries = list(AuditEntry.objects.all())
    assert sorted((e.action, e.outcome, e.target_id) for e in entries) == sorted(
        ("job.pause", "OK", str(job.pk)) for job in active
    )
    assert len({e.request_id for e in entries}) == 1


def test_resume_selected_resumes_only_the_paused_ones(member_client, tenant, make_job):
    paused, active = make_job(tenant), make_job(tenant)
    pause(paused)

    response = member_client.post(URL, {"action": "resume", "ids": ids(paused, active)}, follow=True)

    assert states(paused, active) == ["ACTIVE", "ACTIVE"]
    assert "Resumed 1 job(s); skipped 1" in response.content.decode()


def test_cancel_selected_cancels_active_and_paused_jobs_and_their_pending_runs(member_client, tenant, make_job):
    active, paused, cancelled = make_job(tenant), make_job(tenant), make_job(tenant)
    pause(paused)
    cancel(cancelled)

    response = member_client.post(URL, {"action": "cancel", "ids": ids(active, paused, cancelled)}, follow=True)

    assert states(active, paused, cancelled) == ["CANCELLED"] * 3
    for job in (active, paused):
        assert job.executions.get().state == "CANCELLED"
    assert "Cancelled 2 job(s); skipped 1" in response.content.decode()


def test_a_member_cannot_act_on_another_tenants_jobs(member_client, tenant, other_tenant, make_job):
    """Another tenant's ids are not acted on: they stay as they were, are reported as not found,
    and leave NOT_FOUND audit rows without a tenant (only staff see them)."""
    mine, theirs = make_job(tenant), make_job(other_tenant)

    response = member_client.post(URL, {"action": "pause", "ids": ids(mine, theirs)}, follow=True)

    assert states(mine, theirs) == ["PAUSED", "ACTIVE"]
    assert "1 job(s) not found" in response.content.decode()
    refused = AuditEntry.objects.get(outcome="NOT_FOUND")
    assert (refused.action, refused.target_id, refused.tenant_id) == ("job.pause", str(theirs.pk), None)


def test_staff_act_on_every_tenants_jobs(staff_client, tenant, other_tenant, make_job):
    jobs = [make_job(tenant), make_job(other_tenant)]

    staff_client.post(URL, {"action": "pause", "ids": ids(*jobs)})

    assert states(*jobs) == ["PAUSED", "PAUSED"]


def test_the_bulk_form_needs_its_csrf_token(member, tenant, make_job):
    """Without the token the page carries the POST is refused (403) and nothing changes; with it,
    the selected jobs are paused."""
    job = make_job(tenant)
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)

    assert client.post(URL, {"action": "pause", "ids": ids(job)}).status_code == 403
    assert states(job) == ["ACTIVE"]
    assert not AuditEntry.objects.exists()

    page = client.get("/dashboard/jobs/").content.decode()
    marker = 'name="csrfmiddlewaretoken" value="'
    token = page[page.index(marker) + len(marker) :].split('"', 1)[0]
    response = client.post(URL, {"action": "pause", "ids": ids(job), "csrfmiddlewaretoken": token})

    assert response.status_code == 302
    assert states(job) == ["PAUSED"]


def test_an_unknown_action_is_400_and_a_get_is_405(member_client, tenant, make_job):
    job = make_job(tenant)

    assert member_client.post(URL, {"action": "trigger", "ids": ids(job)}).status_code == 400
    assert member_client.post(URL, {"action": "delete", "ids": ids(job)}).status_code == 400
    assert member_client.get(URL).status_code == 405
    assert states(job) == ["ACTIVE"]
    assert job.executions.count() == 1


def test_nothing_selected_says_so(member_client):
    response = member_client.post(URL, {"action": "pause", "ids": ["not-a-uuid"]}, follow=True)

    assert "Nothing selected." in response.content.decode()
