"""Changes made in the Django admin are in the audit log too, as the admin user (kind "admin")."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse
from rest_framework.test import APIClient

from audit.models import AuditEntry
from tenants.models import ApiToken, Tenant
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


# --- issue 31, item 11: users, tenants' names and members, tokens added inline --------------------


def _tenant_form(tenant=None, **fields) -> dict:
    """The tenant admin's form as a browser posts it, its token inline with `tokens` new rows."""
    new_tokens = fields.pop("new_tokens", [])
    data = {
        "slug": tenant.slug if tenant else "initech",
        "name": tenant.name if tenant else "Initech",
        "weight": 1,
        "tokens-TOTAL_FORMS": len(new_tokens),
        "tokens-INITIAL_FORMS": 0,
        "tokens-MIN_NUM_FORMS": 0,
        "tokens-MAX_NUM_FORMS": 1000,
        **fields,
    }
    for index, name in enumerate(new_tokens):
        data[f"tokens-{index}-name"] = name
    return data


def test_a_user_created_and_changed_in_the_admin_is_audited(admin_client, admin_user):
    """Who may act in the admin and the dashboard: creating a user left no entry at all."""
    response = admin_client.post(
        reverse("admin:auth_user_add"),
        {"username": "mallory", "password1": "x-Secret-123", "password2": "x-Secret-123", "usable_password": "true"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    mallory = get_user_model().objects.get(username="mallory")
    staff = Group.objects.create(name="operators")
    response = admin_client.post(
        reverse("admin:auth_user_change", args=[mallory.pk]),
        {
            "username": "mallory",
            "is_active": "on",
            "is_staff": "on",
            "groups": [staff.pk],
            "date_joined_0": "2026-11-26",
            "date_joined_1": "08:00:00",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]

    added, changed = AuditEntry.objects.order_by("id")
    assert (added.action, added.actor, added.actor_kind, added.target_id) == ("user.add", "admin", "admin", "mallory")
    assert (changed.action, changed.target_id) == ("user.change", "mallory")
    assert "Staff status" in changed.detail and "Added group “operators”" in changed.detail


def test_a_tenant_added_in_the_admin_is_named_by_its_slug_with_its_members(admin_client, django_user_model):
    alice = django_user_model.objects.create_user("alice")

    response = admin_client.post(reverse("admin:tenants_tenant_add"), _tenant_form(members=[alice.pk]))

    assert response.status_code == 302, response.content.decode()[:3000]
    entry = AuditEntry.objects.get()
    tenant = Tenant.objects.get(slug="initech")
    assert (entry.action, entry.target_id, entry.target_label, entry.tenant_id) == (
        "tenant.add",
        "initech",
        "initech",
        tenant.pk,
    )
    assert "Added member “alice”" in entry.detail


def test_a_member_added_to_or_removed_from_a_tenant_is_named(admin_client, django_user_model, tenant):
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    tenant.members.add(bob)

    response = admin_client.post(
        reverse("admin:tenants_tenant_change", args=[tenant.pk]), _tenant_form(tenant, members=[alice.pk])
    )

    assert response.status_code == 302, response.content.decode()[:3000]
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target_id) == ("tenant.change", "acme")
    assert "Added member “alice”" in entry.detail and "Deleted member “bob”" in entry.detail


def test_a_token_added_in_the_tenants_inline_form_is_issued_and_shown_once(admin_client, tenant):
    """The inline saved a row with no key at all (no token anyone could use): it is issued as
    create_token issues one, its key shown once, and audited as the tenant action's."""
    response = admin_client.post(
        reverse("admin:tenants_tenant_change", args=[tenant.pk]), _tenant_form(tenant, new_tokens=["ci"]), follow=True
    )

    assert response.status_code == 200
    (message,) = [str(m) for m in response.context["messages"] if "token for" in str(m)]
    raw = message.split(": ", 1)[1].split(" ", 1)[0]
    token = ApiToken.objects.get(tenant=tenant)
    assert (token.name, token.key_hash, token.key_prefix) == ("ci", ApiToken.hash_key(raw), raw[:10])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/v1/jobs").status_code == 200
    issued, change = AuditEntry.objects.order_by("id")
    assert (issued.action, issued.target_id, issued.tenant_id) == ("apitoken.add", str(token.pk), tenant.pk)
    assert token.key_prefix in issued.detail
    assert change.action == "tenant.change" and token.key_prefix in change.detail
