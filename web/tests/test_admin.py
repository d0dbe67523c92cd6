"""The Django admin: pages open for staff, actions go through the services, state is never a form field."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from executions.models import Execution
from jobs.models import Job
from tenants.models import ApiToken
from tenants.services import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Staff and member users get passwords; the production hasher would cost a second each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def act(client, model: str, action: str, objects) -> object:
    """POST an admin action on `objects` from the changelist, as the action form does."""
    return client.post(
        reverse(f"admin:{model}_changelist"),
        {"action": action, "_selected_action": [str(obj.pk) for obj in objects], "index": 0},
        follow=True,
    )


@pytest.fixture
def objects(tenant, make_job, drive) -> dict:
    job = make_job(tenant, type="CRON")
    token, _ = token_create(tenant=tenant)
    dead = drive(make_job(tenant).executions.get(), "DEAD")
    return {"tenant": tenant, "token": token, "job": job, "execution": job.executions.get(), "dead": dead}


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("tenants_tenant", "tenant"),
        ("tenants_apitoken", "token"),
        ("jobs_job", "job"),
        ("executions_execution", "execution"),
    ],
)
def test_staff_can_open_the_changelist_and_the_change_page(admin_client, objects, model, key):
    """Each model's list and detail page opens (200) for a staff user."""
    assert admin_client.get(reverse(f"admin:{model}_changelist")).status_code == 200
    assert admin_client.get(reverse(f"admin:{model}_change", args=[objects[key].pk])).status_code == 200


def test_changelists_filter_and_search(admin_client, objects):
    """The list filters and search of jobs and executions work (they are how operators find things)."""
    jobs = admin_client.get(reverse("admin:jobs_job_changelist"), {"state": "ACTIVE", "q": "cron"})
    executions = admin_client.get(reverse("admin:executions_execution_changelist"), {"state": "DEAD"})

    assert jobs.status_code == executions.status_code == 200
    assert str(objects["job"].pk) in jobs.content.decode()
    assert list(executions.context["cl"].result_list) == [objects["dead"]]


def test_an_anonymous_visitor_is_sent_to_the_login_page(client, objects):
    """The admin is for staff only."""
    response = client.get(reverse("admin:jobs_job_changelist"))

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


# --- job actions -----------------------------------------------------------------------------------


def test_pause_and_resume_actions(admin_client, objects):
    """Pause then Resume move the selected jobs through the job state machine."""
    job = objects["job"]

    act(admin_client, "jobs_job", "pause", [job])
    job.refresh_from_db()
    assert job.state == "PAUSED"

    act(admin_client, "jobs_job", "resume", [job])
    job.refresh_from_db()
    assert job.state == "ACTIVE"


def test_cancel_action_cancels_the_job_and_its_pending_execution(admin_client, objects):
    """Cancel is the service's cancel: no next fire, the pending execution CANCELLED."""
    job = objects["job"]

    act(admin_client, "jobs_job", "cancel", [job])

    job.refresh_from_db()
    assert job.state == "CANCELLED"
    assert job.next_fire_at is None
    assert Execution.objects.get(pk=objects["execution"].pk).state == "CANCELLED"


def test_trigger_action_makes_an_execution_due_now(admin_client, objects):
    """Trigger adds a PENDING execution of origin TRIGGER."""
    job = objects["job"]

    act(admin_client, "jobs_job", "trigger", [job])

    assert job.executions.filter(origin="TRIGGER", state="PENDING").count() == 1


def test_a_refused_action_is_reported_and_changes_nothing(admin_client, objects):
    """Resuming an ACTIVE job is a forbidden transition: a warning is shown, the job stays ACTIVE."""
    job = objects["job"]

    response = act(admin_client, "jobs_job", "resume", [job])

    messages = [str(message) for message in response.context["messages"]]
    assert any("cannot go from ACTIVE to ACTIVE" in message for message in messages), messages
    job.refresh_from_db()
    assert job.state == "ACTIVE"


def test_jobs_are_not_edited_or_added_in_the_admin(admin_client, objects):
    """Job definitions change through the API (which re-times the schedule): the change page is
    read-only and there is no add page."""
    job = objects["job"]

    response = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    posted = admin_client.post(reverse("admin:jobs_job_change", args=[job.pk]), {"name": "renamed"})

    assert 'name="schedule"' not in response.content.decode()
    assert posted.status_code == 403
    assert admin_client.get(reverse("admin:jobs_job_add")).status_code == 403
    job.refresh_from_db()
    assert job.name != "renamed"


# --- execution actions -----------------------------------------------------------------------------


def test_cancel_action_on_an_execution(admin_client, objects):
    """Cancel moves a PENDING execution to CANCELLED, with an event naming the admin user."""
    execution = objects["execution"]

    act(admin_client, "executions_execution", "cancel", [execution])

    execution.refresh_from_db()
    assert execution.state == "CANCELLED"
    assert "(admin)" in execution.events.last().message


def test_retry_action_re_drives_a_dead_execution(admin_client, objects):
    """Retry moves a DEAD execution to PENDING as its next attempt."""
    dead = objects["dead"]

    act(admin_client, "executions_execution", "retry", [dead])

    dead.refresh_from_db()
    assert (dead.state, dead.attempt) == ("PENDING", 2)


def test_retry_action_on_a_pending_execution_warns_and_changes_nothing(admin_client, objects):
    """A re-drive of an execution that has not failed is refused with a warning."""
    execution = objects["execution"]

    response = act(admin_client, "executions_execution", "retry", [execution])

    assert any("cannot go from PENDING" in str(message) for message in response.context["messages"])
    execution.refresh_from_db()
    assert (execution.state, execution.attempt) == ("PENDING", 1)


def test_execution_state_is_read_only_in_the_admin(admin_client, objects):
    """An execution's state is shown, never a form field, and a posted form cannot change it."""
    from django.contrib import admin

    from web.admin import ExecutionAdmin

    execution = objects["execution"]
    url = reverse("admin:executions_execution_change", args=[execution.pk])

    page = admin_client.get(url)
    posted = admin_client.post(url, {"state": "SUCCEEDED", "attempt": 9})

    assert 'name="state"' not in page.content.decode()
    assert "state" in ExecutionAdmin(Execution, admin.site).get_readonly_fields(page.wsgi_request, execution)
    assert posted.status_code == 403
    execution.refresh_from_db()
    assert (execution.state, execution.attempt) == ("PENDING", 1)


# --- permissions -----------------------------------------------------------------------------------


@pytest.fixture
def viewer(client, django_user_model):
    """A staff user with only the view permissions."""
    user = django_user_model.objects.create_user("viewer", password="pw-viewer-1234", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(codename__in=["view_job", "view_execution", "view_tenant", "view_apitoken"])
    )
    client.force_login(user)
    return client


def test_a_view_only_staff_user_sees_pages_but_cannot_run_actions(viewer, objects):
    """Actions change state, so they need the change permission: a viewer gets none, and posting one
    anyway does nothing."""
    job, execution, tenant = objects["job"], objects["execution"], objects["tenant"]
    assert viewer.get(reverse("admin:jobs_job_changelist")).status_code == 200

    act(viewer, "jobs_job", "cancel", [job])
    act(viewer, "executions_execution", "cancel", [execution])
    act(viewer, "tenants_tenant", "issue_token", [tenant])

    job.refresh_from_db()
    execution.refresh_from_db()
    assert (job.state, execution.state) == ("ACTIVE", "PENDING")
    assert ApiToken.objects.filter(tenant=tenant).count() == 1
    assert viewer.get(reverse("admin:jobs_job_changelist")).context["action_form"] is None


def test_a_staff_user_with_change_permission_can_run_actions(client, django_user_model, objects):
    """The change permission on jobs is what grants the job actions."""
    user = django_user_model.objects.create_user("operator", password="pw-operator-1234", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_job", "change_job"]))
    client.force_login(user)
    job = objects["job"]

    act(client, "jobs_job", "pause", [job])

    job.refresh_from_db()
    assert job.state == "PAUSED"


# --- tenants ---------------------------------------------------------------------------------------


def test_issue_token_action_shows_the_token_once_and_stores_its_hash(admin_client, objects):
    """The tenant action issues a working token, shows it in a message, and stores only its hash."""
    tenant = objects["tenant"]

    response = act(admin_client, "tenants_tenant", "issue_token", [tenant])

    (message,) = [str(m) for m in response.context["messages"] if "token for" in str(m)]
    raw = message.split(": ", 1)[1].split(" ", 1)[0]
    assert ApiToken.objects.filter(tenant=tenant, key_hash=ApiToken.hash_key(raw)).exists()
    assert Job.objects.count() == 2  # the fixture's jobs only; nothing else happened
