"""The audit page shows the actions of every actor (dashboard, API token, admin), filtered by kind."""

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEntry
from tenants.services import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_kinds(tenant, member_client, make_job, admin_client):
    """One action of each kind on acme's jobs: the API pauses, the dashboard resumes, the admin pauses."""
    job = make_job(tenant, type="CRON", name="nightly")
    _, raw = token_create(tenant=tenant, name="deploy")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.post(f"/v1/jobs/{job.pk}/pause").status_code == 200
    assert member_client.post(f"/dashboard/jobs/{job.pk}/resume").status_code == 302
    admin_client.post(
        "/admin/jobs/job/", {"action": "pause", "_selected_action": [str(job.pk)], "index": 0}, follow=True
    )
    return job


def test_the_audit_page_lists_every_actor_and_filters_by_kind(staff_client, three_kinds):
    page = staff_client.get("/dashboard/audit/").content.decode()
    assert "token deploy (" in page and ">api<" in page
    assert ">admin<" in page and ">dashboard<" in page

    for kind, actions in (("api", ["job.pause"]), ("dashboard", ["job.resume"]), ("admin", ["job.pause"])):
        entries = staff_client.get("/dashboard/audit/", {"kind": kind}).context["entries"]
        assert [e.action for e in entries] == actions
        assert {e.actor_kind for e in entries} == {kind}


def test_rows_from_before_the_kind_was_recorded_count_as_dashboard(staff_client, tenant):
    from django.utils import timezone

    AuditEntry.objects.create(
        at=timezone.now(), actor="ada", action="job.pause", target_type="job", outcome="OK", tenant_id=tenant.pk
    )
    entries = staff_client.get("/dashboard/audit/", {"kind": "dashboard"}).context["entries"]
    assert [e.actor_kind for e in entries] == [None]


def test_a_member_sees_the_api_rows_of_their_tenant_only(member_client, three_kinds, other_tenant):
    _, raw = token_create(tenant=other_tenant, name="theirs")
    theirs = APIClient()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    theirs.post("/v1/jobs/00000000-0000-0000-0000-000000000000/pause")  # a NOT_FOUND row of globex

    entries = member_client.get("/dashboard/audit/", {"kind": "api"}).context["entries"]
    assert [e.actor for e in entries if "theirs" in e.actor] == []
    assert len(entries) == 1
