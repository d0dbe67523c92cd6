"""Changes made in the Django admin are in the audit log too, as the admin user (kind "admin")."""

import pytest
from django.urls import reverse

from audit.models import AuditEntry
from tenants.models import ApiToken
from tenants.services import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def act(client, model: str, action: str, objects):
    return client.post(
        reverse(f"admin:{model}_changelist"),
        {"action": action, "_selected_action": [str(obj.pk) for obj in objects], "index": 0},
        follow=True,
    )


def test_a_job_action_in_the_admin_is_audited_per_job(admin_client, admin_user, tenant, make_job):
    job = make_job(tenant, type="CRON", name="nightly")
    act(admin_client, "jobs_job", "pause", [job])
    act(admin_client, "jobs_job", "pause", [job])  # already paused: refused

    ok, refused = AuditEntry.objects.order_by("id")
    assert (ok.actor, ok.actor_kind, ok.actor_id) == ("admin", "admin", admin_user.pk)
    assert (ok.action, ok.target_id, ok.tenant_id, ok.outcome) == ("job.pause", str(job.pk), tenant.pk, "OK")
    assert (refused.action, refused.outcome) == ("job.pause", "REFUSED")


def test_an_execution_action_in_the_admin_is_audited(admin_client, tenant, make_job, drive):
    dead = drive(make_job(tenant).executions.get(), "DEAD")
    act(admin_client, "executions_execution", "retry", [dead])

    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target_type, entry.target_id, entry.outcome) == (
        "execution.retry",
        "execution",
        str(dead.pk),
        "OK",
    )


def test_a_token_revoked_and_issued_in_the_admin_is_audited(admin_client, tenant):
    token, _ = token_create(tenant=tenant, name="ci")
    page = reverse("admin:tenants_apitoken_change", args=[token.pk])
    response = admin_client.post(page, {"name": "ci", "revoked_at_0": "2026-11-26", "revoked_at_1": "08:00:00"})
    assert response.status_code == 302, response.content.decode()[:2000]
    act(admin_client, "tenants_tenant", "issue_token", [tenant])

    change, issued = AuditEntry.objects.order_by("id")
    assert (change.action, change.actor_kind, change.target_id, change.tenant_id) == (
        "apitoken.change",
        "admin",
        str(token.pk),
        tenant.pk,
    )
    assert "Revoked at" in change.detail
    new = ApiToken.objects.exclude(pk=token.pk).get()
    assert (issued.action, issued.target_id, issued.outcome) == ("apitoken.add", str(new.pk), "OK")
    assert new.key_prefix in issued.detail


def test_a_deletion_in_the_admin_is_audited_before_the_object_goes(admin_client, tenant, make_job):
    jobs = [make_job(tenant, name=f"old-{i}") for i in range(3)]
    response = admin_client.post(
        reverse("admin:jobs_job_changelist"),
        {"action": "delete_selected", "_selected_action": [str(j.pk) for j in jobs], "post": "yes"},
        follow=True,
    )
    assert response.status_code == 200

    entries = list(AuditEntry.objects.order_by("id"))
    assert [e.action for e in entries] == ["job.delete"] * 3
    assert {e.target_label.split(" ")[0] for e in entries} == {"old-0", "old-1", "old-2"}
