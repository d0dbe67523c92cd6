"""The dashboard's pages and actions through the Django test client: login, tenant scoping,
CSRF, the audit trail, and that actions go through the same services as the API."""

import json
import uuid
from datetime import timedelta

import pytest
from django.db import DatabaseError, transaction
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from executions.models import Execution
from jobs.models import Job

pytestmark = pytest.mark.django_db


def _job_form(**overrides) -> dict:
    data = {
        "name": "nightly export",
        "type": "ONCE",
        "runAt": (timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "delaySec": "",
        "schedule": "",
        "timezone": "UTC",
        "handler": "noop",
        "pool": "",
        "payload": '{"rows": 10}',
        "maxAttempts": "3",
        "backoff": "EXPONENTIAL",
        "initialDelayMs": "1000",
        "maxDelayMs": "60000",
        "jitter": ["false", "true"],
        "timeoutSec": "600",
        "priority": "NORMAL",
        "misfirePolicy": "RUN_ONCE",
        "concurrencyPolicy": "ALLOW",
        "tenant": "acme",
    }
    data.update(overrides)
    return data


# --- Login and routes ---------------------------------------------------------------------------------


def test_root_redirects_to_the_dashboard(client):
    """`/` answers with a redirect to /dashboard/."""
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/dashboard/"


@pytest.mark.parametrize("path", ["/dashboard/", "/dashboard/jobs/", "/dashboard/executions/", "/dashboard/audit/"])
def test_pages_need_a_login(client, path):
    """An anonymous visitor is sent to /accounts/login/ with the page as `next`."""
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith(f"/accounts/login/?next={path}")


def test_a_tenant_member_signs_in_at_accounts_login(member):
    """Non-staff members use /accounts/login/ (the admin's login admits staff only) and land on
    the overview."""
    client = Client()
    response = client.post("/accounts/login/", {"username": "ada", "password": "correct horse battery staple"})
    assert response.status_code == 302
    assert response["Location"] == "/dashboard/"
    assert client.get("/dashboard/").status_code == 200


def test_every_page_renders_for_staff(staff_client, tenant, make_job, drive):
    """Overview, lists, details, forms and the audit log answer 200 with data in every state."""
    job = make_job(tenant, type="CRON", schedule="*/5 * * * *", timezone="Europe/Paris")
    dead = drive(make_job(tenant, handler="fail").executions.get(), "DEAD")
    drive(make_job(tenant).executions.get(), "SUCCEEDED")
    drive(make_job(tenant).executions.get(), "RUNNING")
    pages = [
        "/dashboard/",
        "/dashboard/jobs/",
        "/dashboard/jobs/?q=job&state=ACTIVE&type=CRON&pool=default&handler=noop",
        "/dashboard/jobs/new",
        f"/dashboard/jobs/{job.pk}/",
        f"/dashboard/jobs/{job.pk}/edit",
        "/dashboard/executions/",
        "/dashboard/executions/?state=DEAD",
        "/dashboard/executions/?pool=default&tenant=acme&since=2020-01-01T00:00&until=2100-01-01T00:00",
        f"/dashboard/executions/?job={job.pk}",
        f"/dashboard/executions/{dead.pk}/",
        "/dashboard/audit/",
    ]
    for page in pages:
        response = staff_client.get(page)
        assert response.status_code == 200, page


def test_static_files_are_served_by_the_app(client):
    """The standalone ASGI server has no web server in front: CSS and JS come from the app."""
    response = client.get("/static/dashboard/app.js")
    assert response.status_code == 200
    assert b"WebSocket" in b"".join(response.streaming_content)


# --- Scoping ----------------------------------------------------------------------------------------------


def test_a_member_sees_only_the_jobs_of_its_tenants(member_client, tenant, other_tenant, make_job):
    """Lists show the member's tenants' jobs and executions only."""
    mine = make_job(tenant, name="acme-report")
    theirs = make_job(other_tenant, name="globex-secret")

    jobs = member_client.get("/dashboard/jobs/").content.decode()
    executions = member_client.get("/dashboard/executions/").content.decode()

    assert "acme-report" in jobs and "globex-secret" not in jobs
    assert str(mine.pk) in jobs and str(theirs.pk) not in jobs
    assert "acme-report" in executions and "globex-secret" not in executions
    assert str(theirs.executions.get().pk)[:8] not in executions


def test_another_tenants_objects_answer_404(member_client, other_tenant, make_job):
    """Direct URLs to another tenant's job or execution answer 404, as if they did not exist."""
    theirs = make_job(other_tenant, name="globex-secret")
    execution = theirs.executions.get()
    for path in (
        f"/dashboard/jobs/{theirs.pk}/",
        f"/dashboard/jobs/{theirs.pk}/edit",
        f"/dashboard/executions/{execution.pk}/",
    ):
        assert member_client.get(path).status_code == 404, path


def test_a_tenant_filter_cannot_widen_the_scope(member_client, other_tenant, make_job):
    """?tenant=globex for a member of acme only shows nothing, not globex's rows."""
    make_job(other_tenant, name="globex-secret")
    for path in ("/dashboard/jobs/?tenant=globex", "/dashboard/executions/?tenant=globex"):
        assert "globex-secret" not in member_client.get(path).content.decode()


def test_the_overview_counts_only_the_members_tenants(member_client, staff_client, tenant, other_tenant, make_job):
    """Execution counts by state on the overview are scoped: staff count both tenants' rows."""
    make_job(tenant)
    make_job(other_tenant)
    make_job(other_tenant)

    def pending(client) -> str:
        html = client.get("/dashboard/").content.decode()
        cell = html[html.index('data-testid="count-PENDING"') :]
        return cell[cell.index("<strong>") + 8 : cell.index("</strong>")]

    assert pending(member_client) == "1"
    assert pending(staff_client) == "3"


def test_a_member_cannot_act_on_another_tenants_job(member_client, other_tenant, make_job):
    """POST to another tenant's job answers 404, changes nothing, and leaves a NOT_FOUND audit
    row that has no tenant (so only staff see it)."""
    theirs = make_job(other_tenant)
    response = member_client.post(f"/dashboard/jobs/{theirs.pk}/pause")
    assert response.status_code == 404
    assert Job.objects.get(pk=theirs.pk).standing == "ACTIVE"
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome, entry.tenant_id, entry.actor) == ("job.pause", "NOT_FOUND", None, "ada")


def test_the_audit_log_is_scoped(member_client, staff_client, tenant, other_tenant, make_job):
    """A member sees audit entries about its tenants' objects; staff see all of them."""
    mine, theirs = make_job(tenant, name="mine"), make_job(other_tenant, name="theirs")
    staff_client.post(f"/dashboard/jobs/{mine.pk}/pause")
    staff_client.post(f"/dashboard/jobs/{theirs.pk}/pause")

    member_view = member_client.get("/dashboard/audit/").content.decode()
    staff_view = staff_client.get("/dashboard/audit/").content.decode()

    assert str(mine.pk) in member_view and str(theirs.pk) not in member_view
    assert str(mine.pk) in staff_view and str(theirs.pk) in staff_view


# --- CSRF -----------------------------------------------------------------------------------------------


def test_actions_refuse_a_post_without_the_csrf_token(member, tenant, make_job):
    """A cross-site POST (no token) is refused with 403 and changes nothing, audits nothing."""
    job = make_job(tenant)
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)

    for path in (
        f"/dashboard/jobs/{job.pk}/pause",
        f"/dashboard/executions/{job.executions.get().pk}/cancel",
        "/dashboard/executions/retry",
        "/dashboard/jobs/new",
    ):
        assert client.post(path, {"ids": [str(job.pk)]}).status_code == 403, path
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"
    assert not AuditEntry.objects.exists()


def test_actions_accept_the_token_the_page_carries(member, tenant, make_job):
    """The token rendered in the job page's forms is what the action needs."""
    job = make_job(tenant)
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    page = client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    marker = 'name="csrfmiddlewaretoken" value="'
    token = page[page.index(marker) + len(marker) :].split('"', 1)[0]

    response = client.post(f"/dashboard/jobs/{job.pk}/pause", {"csrfmiddlewaretoken": token})

    assert response.status_code == 302
    assert Job.objects.get(pk=job.pk).state == "PAUSED"


def test_actions_are_post_only(member_client, tenant, make_job):
    """A GET to an action URL does nothing (405)."""
    job = make_job(tenant)
    assert member_client.get(f"/dashboard/jobs/{job.pk}/cancel").status_code == 405
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"


# --- Job actions ------------------------------------------------------------------------------------------


def test_pause_resume_trigger_cancel_go_through_the_services_and_are_audited(member_client, member, tenant, make_job):
    """Each action moves the job as the API would, and writes one OK audit row naming who did
    what to which job."""
    job = make_job(tenant, type="CRON", schedule="0 * * * *")

    member_client.post(f"/dashboard/jobs/{job.pk}/pause")
    assert Job.objects.get(pk=job.pk).state == "PAUSED"
    member_client.post(f"/dashboard/jobs/{job.pk}/resume")
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"
    member_client.post(f"/dashboard/jobs/{job.pk}/trigger")
    assert job.executions.filter(origin="TRIGGER", state="PENDING").count() == 1
    member_client.post(f"/dashboard/jobs/{job.pk}/cancel")
    assert Job.objects.get(pk=job.pk).state == "CANCELLED"
    assert not job.executions.filter(state="PENDING").exists()

    entries = list(AuditEntry.objects.order_by("id"))
    assert [e.action for e in entries] == ["job.pause", "job.resume", "job.trigger", "job.cancel"]
    for entry in entries:
        assert entry.outcome == "OK"
        assert (entry.actor, entry.actor_id) == ("ada", member.pk)
        assert (entry.target_type, entry.target_id, entry.target_label) == ("job", str(job.pk), job.name)
        assert entry.tenant_id == tenant.pk
        assert entry.source_ip == "127.0.0.1"
    assert "execution" in entries[2].detail


def test_a_refused_action_is_audited_and_reported(member_client, tenant, make_job):
    """Resuming a job that is not paused is refused by the service: the page says why, and the
    audit row records REFUSED with the reason."""
    job = make_job(tenant)
    response = member_client.post(f"/dashboard/jobs/{job.pk}/resume", follow=True)
    assert "refused" in response.content.decode()
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome) == ("job.resume", "REFUSED")
    assert "ACTIVE" in entry.detail


def test_an_action_returns_to_a_safe_next_url_only(member_client, tenant, make_job):
    """`next` may send the browser back to a page of this site, never to another host."""
    job = make_job(tenant)
    ok = member_client.post(f"/dashboard/jobs/{job.pk}/pause", {"next": "/dashboard/jobs/?state=PAUSED"})
    assert ok["Location"] == "/dashboard/jobs/?state=PAUSED"
    evil = member_client.post(f"/dashboard/jobs/{job.pk}/resume", {"next": "https://evil.example/"})
    assert evil["Location"] == f"/dashboard/jobs/{job.pk}/"


# --- Create and edit --------------------------------------------------------------------------------------


def test_creating_a_job_through_the_form(member_client, tenant):
    """The form's fields become an API body, validated by JobInputSerializer and created by
    job_create: the job and its first execution exist, and the audit row names the new job."""
    response = member_client.post("/dashboard/jobs/new", _job_form())

    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/dashboard/jobs/{job.pk}/"
    assert (job.name, job.type, job.handler, job.pool, job.tenant) == (
        "nightly export",
        "ONCE",
        "noop",
        "default",
        tenant,
    )
    assert job.payload == {"rows": 10}
    assert job.timeout_sec == 600
    assert job.executions.get().state == "PENDING"
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome, entry.target_id, entry.tenant_id) == (
        "job.create",
        "OK",
        str(job.pk),
        tenant.pk,
    )


def test_creating_a_cron_job(member_client):
    """A CRON job takes its schedule and timezone; other timing fields are not sent."""
    member_client.post(
        "/dashboard/jobs/new", _job_form(type="CRON", schedule="30 2 * * *", timezone="America/Los_Angeles")
    )
    job = Job.objects.get()
    assert (job.type, job.schedule, job.timezone, job.run_at) == ("CRON", "30 2 * * *", "America/Los_Angeles", None)


def test_creating_and_editing_an_interval_job(member_client, tenant):
    """An INTERVAL job takes its period and its start; an edit of the period re-times the pending
    fire, and the edit form shows what the job has."""
    member_client.post("/dashboard/jobs/new", _job_form(type="INTERVAL", everySec="90", startAt="2031-01-01T09:00:00Z"))
    job = Job.objects.get()
    assert (job.type, job.every_sec, job.start_at.isoformat()) == ("INTERVAL", 90, "2031-01-01T09:00:00+00:00")
    assert job.executions.get().scheduled_for == job.start_at
    form = member_client.get(f"/dashboard/jobs/{job.pk}/edit").content.decode()
    assert 'name="everySec" value="90"' in form and 'value="2031-01-01T09:00:00Z"' in form
    member_client.post(f"/dashboard/jobs/{job.pk}/edit", {**_job_form(type="INTERVAL", everySec="600",
                       startAt="2031-01-01T09:00:00Z"), "tenant": tenant.slug})  # fmt: skip
    job.refresh_from_db()
    assert job.every_sec == 600
    invalid = member_client.post("/dashboard/jobs/new", _job_form(type="INTERVAL", everySec="0"))
    assert 'data-error-for="everySec"' in invalid.content.decode()


def test_the_form_reports_the_apis_validation_errors(member_client):
    """Bad cron, unknown handler and malformed JSON are reported per field with the API's own
    messages; nothing is created; the attempt is audited as INVALID."""
    response = member_client.post(
        "/dashboard/jobs/new", _job_form(type="CRON", schedule="61 * * * *", handler="nope", payload="{oops")
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-error-for="schedule"' in html
    assert 'data-error-for="handler"' in html and "unknown handler" in html
    assert 'data-error-for="payload"' in html and "not valid JSON" in html
    assert not Job.objects.exists()
    assert AuditEntry.objects.get().outcome == "INVALID"


def test_a_member_cannot_create_in_another_tenant(member_client, other_tenant):
    """Naming a tenant the user does not belong to is a field error, not a job there."""
    response = member_client.post("/dashboard/jobs/new", _job_form(tenant="globex"))
    assert response.status_code == 200
    assert 'data-error-for="tenant"' in response.content.decode()
    assert not Job.objects.exists()


def test_editing_a_schedule_goes_through_job_update(member_client, tenant, make_job):
    """Changing the cron schedule re-times the pending fire (job_update) and the audit row lists
    the changed fields only."""
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    form = member_client.get(f"/dashboard/jobs/{job.pk}/edit").context["values"]

    response = member_client.post(f"/dashboard/jobs/{job.pk}/edit", {**form, "schedule": "*/10 * * * *"})

    assert response.status_code == 302
    job.refresh_from_db()
    assert job.schedule == "*/10 * * * *"
    assert job.executions.get(state="PENDING").scheduled_for == job.next_fire_at
    assert job.next_fire_at.minute % 10 == 0
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome, entry.detail) == ("job.update", "OK", "changed schedule")


def test_editing_only_the_payload_of_a_delayed_job_keeps_its_time(member_client, tenant, make_job):
    """Unchanged fields are not sent: a DELAYED job's delay does not restart from now."""
    job = make_job(tenant, type="DELAYED", delay_sec=600)
    run_at = job.run_at
    form = member_client.get(f"/dashboard/jobs/{job.pk}/edit").context["values"]

    member_client.post(f"/dashboard/jobs/{job.pk}/edit", {**form, "payload": '{"v": 2}'})

    job.refresh_from_db()
    assert job.payload == {"v": 2}
    assert job.run_at == run_at


def test_an_invalid_edit_changes_nothing(member_client, tenant, make_job):
    """An edit is validated like PATCH /v1/jobs/{id}: a bad schedule is a field error."""
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    form = member_client.get(f"/dashboard/jobs/{job.pk}/edit").context["values"]
    response = member_client.post(f"/dashboard/jobs/{job.pk}/edit", {**form, "schedule": "not cron"})
    assert 'data-error-for="schedule"' in response.content.decode()
    assert Job.objects.get(pk=job.pk).schedule == "0 * * * *"
    assert AuditEntry.objects.get().outcome == "INVALID"


# --- Execution actions ------------------------------------------------------------------------------------


def test_cancelling_a_pending_execution(member_client, tenant, make_job):
    """Cancel calls execution_cancel: a pending execution is CANCELLED at once, and audited."""
    execution = make_job(tenant).executions.get()
    member_client.post(f"/dashboard/executions/{execution.pk}/cancel")
    assert Execution.objects.get(pk=execution.pk).state == "CANCELLED"
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome, entry.target_id, entry.job_id) == (
        "execution.cancel",
        "OK",
        str(execution.pk),
        execution.job_id,
    )


def test_cancelling_a_running_execution_records_the_request(member_client, tenant, make_job, drive):
    """A running execution gets a cancel request that its worker reads with the next heartbeat."""
    execution = drive(make_job(tenant).executions.get(), "RUNNING")
    member_client.post(f"/dashboard/executions/{execution.pk}/cancel")
    execution.refresh_from_db()
    assert execution.state == "RUNNING"
    assert execution.cancel_requested_at is not None
    assert AuditEntry.objects.get().detail == "cancel requested (running)"


def test_retrying_one_dead_execution(member_client, tenant, make_job, drive):
    """Retry re-drives a DEAD execution as its next attempt, PENDING and due now."""
    execution = drive(make_job(tenant, handler="fail").executions.get(), "DEAD")
    member_client.post(f"/dashboard/executions/{execution.pk}/retry")
    execution.refresh_from_db()
    assert (execution.state, execution.attempt) == ("PENDING", 2)
    assert AuditEntry.objects.get().action == "execution.retry"


def test_retrying_many_from_the_dead_letter_view(member_client, tenant, make_job, drive):
    """ "Retry selected" re-drives each DEAD one, refuses what cannot be re-driven, and writes one
    audit row per execution, all with the same request id."""
    dead = [drive(make_job(tenant, handler="fail").executions.get(), "DEAD") for _ in range(3)]
    succeeded = drive(make_job(tenant).executions.get(), "SUCCEEDED")
    ids = [str(e.pk) for e in dead] + [str(succeeded.pk)]

    response = member_client.post("/dashboard/executions/retry", {"ids": ids}, follow=True)

    assert response.redirect_chain[-1][0] == "/dashboard/executions/?state=DEAD"
    assert {Execution.objects.get(pk=e.pk).state for e in dead} == {"PENDING"}
    assert Execution.objects.get(pk=succeeded.pk).state == "SUCCEEDED"
    entries = list(AuditEntry.objects.filter(action="execution.retry"))
    assert sorted(e.outcome for e in entries) == ["OK", "OK", "OK", "REFUSED"]
    assert len({e.request_id for e in entries}) == 1
    assert "Re-driven 3 execution(s)" in response.content.decode()


def test_bulk_retry_ignores_other_tenants_ids(member_client, other_tenant, make_job, drive):
    """Ids outside the member's scope are not re-driven (NOT_FOUND audit, no tenant)."""
    theirs = drive(make_job(other_tenant, handler="fail").executions.get(), "DEAD")
    member_client.post("/dashboard/executions/retry", {"ids": [str(theirs.pk), "not-a-uuid"]})
    assert Execution.objects.get(pk=theirs.pk).state == "DEAD"
    entry = AuditEntry.objects.get()
    assert (entry.outcome, entry.tenant_id) == ("NOT_FOUND", None)


def test_the_dead_letter_view_lists_dead_executions_with_checkboxes(member_client, tenant, make_job, drive):
    """?state=DEAD shows only DEAD rows, each selectable for "Retry selected"."""
    dead = drive(make_job(tenant, handler="fail", name="broken").executions.get(), "DEAD")
    drive(make_job(tenant, name="fine").executions.get(), "SUCCEEDED")
    html = member_client.get("/dashboard/executions/?state=DEAD").content.decode()
    assert f'name="ids" value="{dead.pk}"' in html
    assert "broken" in html and ">fine<" not in html


def test_job_and_execution_pages_show_their_audit_entries(member_client, tenant, make_job):
    """The job page lists actions on the job and on its executions; the execution page its own."""
    job = make_job(tenant)
    execution = job.executions.get()
    member_client.post(f"/dashboard/jobs/{job.pk}/trigger")
    member_client.post(f"/dashboard/executions/{execution.pk}/cancel")

    job_page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    execution_page = member_client.get(f"/dashboard/executions/{execution.pk}/").content.decode()

    assert "job.trigger" in job_page and "execution.cancel" in job_page
    assert "execution.cancel" in execution_page and "job.trigger" not in execution_page


# --- The audit log itself --------------------------------------------------------------------------------


def test_audit_rows_cannot_be_changed_or_deleted(member_client, tenant, make_job):
    """The database refuses UPDATE and DELETE on the audit table (append-only)."""
    member_client.post(f"/dashboard/jobs/{make_job(tenant).pk}/pause")
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditEntry.objects.update(actor="someone else")
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.get().actor == "ada"


def test_the_audit_page_filters(staff_client, tenant, make_job):
    """The audit log filters by action, outcome and target."""
    job = make_job(tenant)
    staff_client.post(f"/dashboard/jobs/{job.pk}/pause")
    staff_client.post(f"/dashboard/jobs/{job.pk}/pause")  # refused: already paused

    refused = staff_client.get("/dashboard/audit/?outcome=REFUSED").context["entries"]
    by_target = staff_client.get(f"/dashboard/audit/?target={job.pk}&action=job.pause").context["entries"]
    unknown = staff_client.get(f"/dashboard/audit/?target={uuid.uuid4()}").context["entries"]

    assert [e.outcome for e in refused] == ["REFUSED"]
    assert len(by_target) == 2
    assert unknown == []


# --- Page content --------------------------------------------------------------------------------------


def test_the_jobs_page_shows_next_fires_in_utc_and_local_time(member_client, tenant, make_job):
    """A cron job in a zone other than UTC lists its next fire in UTC and its local wall time."""
    make_job(tenant, type="CRON", schedule="0 9 * * *", timezone="Asia/Tokyo")
    html = member_client.get("/dashboard/jobs/").content.decode()
    assert "00:00:00Z" in html  # 09:00 in Tokyo is midnight UTC
    assert "local 09:00:00 JST" in html


def test_the_job_page_shows_ten_next_fires(member_client, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="*/5 * * * *", timezone="Europe/Paris")
    fires = member_client.get(f"/dashboard/jobs/{job.pk}/").context["fires"]
    assert len(fires) == 10
    assert all(f.local.utcoffset() in (timedelta(hours=1), timedelta(hours=2)) for f in fires)


def test_the_execution_page_shows_attempts_error_and_timeline(member_client, tenant, make_job, drive):
    execution = drive(make_job(tenant, handler="fail").executions.get(), "DEAD")
    response = member_client.get(f"/dashboard/executions/{execution.pk}/")
    html = response.content.decode()
    assert "boom" in html  # the error
    assert [a.outcome for a in response.context["attempts"]] == ["DEAD"]
    assert [e.to_state for e in response.context["events"]] == ["PENDING", "QUEUED", "RUNNING", "FAILED", "DEAD"]


def test_the_execution_page_shows_its_trace_id_when_it_was_made_traced(member_client, tenant, make_job):
    """Tracing on (README, "Tracing"): the trace to look for in the tracing backend; off: no row."""
    untraced = make_job(tenant).executions.get()
    traced = make_job(tenant).executions.get()
    Execution.objects.filter(pk=traced.pk).update(traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

    page = member_client.get(f"/dashboard/executions/{traced.pk}/").content.decode()
    assert "<dt>Trace</dt>" in page and "4bf92f3577b34da6a3ce929d0e0e4736" in page
    assert "<dt>Trace</dt>" not in member_client.get(f"/dashboard/executions/{untraced.pk}/").content.decode()


def test_the_overview_chart_data_is_embedded_as_json(member_client, tenant, make_job, drive):
    """The charts draw from a JSON blob of 60 minutes; a finished run shows in the last minute."""
    drive(make_job(tenant).executions.get(), "SUCCEEDED")
    html = member_client.get("/dashboard/").content.decode()
    blob = html[html.index('<script id="chart-data" type="application/json">') :]
    data = json.loads(blob[blob.index(">") + 1 : blob.index("</script>")])
    assert len(data["minutes"]) == 60
    assert sum(data["succeeded"]) == 1


def test_a_live_refresh_does_not_consume_flash_messages(member_client, tenant, make_job):
    """The page's background re-render (X-Live-Refresh) leaves a pending message for the next
    page the operator actually opens."""
    job = make_job(tenant)
    member_client.post(f"/dashboard/jobs/{job.pk}/pause")
    refresh = member_client.get("/dashboard/jobs/", headers={"X-Live-Refresh": "1"}).content.decode()
    shown = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    assert "paused." not in refresh
    assert "paused." in shown


def test_a_waiting_execution_says_why_on_its_page_and_in_the_lists(staff_client, tenant, make_job):
    """pendingReason on the execution page, and as the error column of every list of executions."""
    from datetime import timedelta

    from django.utils import timezone

    from executions.models import Execution

    job = make_job(tenant, run_at=timezone.now() - timedelta(seconds=5))
    execution = Execution.objects.get(job=job)  # due, and no worker serves its pool
    page = staff_client.get(f"/dashboard/executions/{execution.pk}/").content.decode()
    assert 'data-testid="pending-reason"' in page and "NO_WORKERS" in page
    assert "no live worker serves pool default" in page
    for path in ("/dashboard/executions/?state=PENDING", f"/dashboard/jobs/{job.pk}/"):
        listed = staff_client.get(path).content.decode()
        assert "NO_WORKERS" in listed and "Error, or why it waits" in listed
