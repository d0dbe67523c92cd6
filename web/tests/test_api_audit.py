"""Every change made through the API is in the audit log: the token by name, the outcome, the
address and the request id; one row (one INSERT) per request, in the change's own transaction."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from audit.models import AuditEntry
from jobs.models import Job
from jobs.versions import version_latest
from tenants.services import token_create

pytestmark = pytest.mark.django_db

CRON = {"name": "nightly", "type": "CRON", "schedule": "0 2 * * *", "target": {"handler": "noop"}}


@pytest.fixture
def deploy(tenant):
    """A client with a token named "deploy" of tenant acme."""
    token, raw = token_create(tenant=tenant, name="deploy")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.token = token
    return client


def test_a_job_created_with_a_token_is_audited_under_the_tokens_name(deploy, tenant):
    """The row names the token as a job's version does, the job, its tenant, the address, and
    the request id sent back to the caller."""
    response = deploy.post("/v1/jobs", CRON, format="json")

    assert response.status_code == 201
    entry = AuditEntry.objects.get()
    job = Job.objects.get()
    assert entry.actor == f"token deploy ({deploy.token.key_prefix}) of acme"
    assert entry.actor == version_latest(job=job).actor == job.created_by
    assert (entry.actor_kind, entry.action, entry.outcome) == ("api", "job.create", "OK")
    assert (entry.target_type, entry.target_id, entry.target_label) == ("job", str(job.pk), "nightly")
    assert (entry.job_id, entry.tenant_id, entry.actor_id) == (job.pk, tenant.pk, None)
    assert entry.source_ip == "127.0.0.1"
    assert str(entry.request_id) == response["X-Request-Id"]
    assert entry.detail == "CRON noop in default"


def test_each_job_action_leaves_one_row(deploy):
    """Update, pause, resume, trigger and cancel: one row each, named by action."""
    job_id = deploy.post("/v1/jobs", CRON, format="json").json()["jobId"]
    assert deploy.patch(f"/v1/jobs/{job_id}", {"schedule": "0 3 * * *"}, format="json").status_code == 200
    assert deploy.post(f"/v1/jobs/{job_id}/pause").status_code == 200
    assert deploy.post(f"/v1/jobs/{job_id}/resume").status_code == 200
    assert deploy.post(f"/v1/jobs/{job_id}/trigger").status_code == 200
    assert deploy.delete(f"/v1/jobs/{job_id}").status_code == 200

    entries = list(AuditEntry.objects.order_by("id"))
    assert [e.action for e in entries] == [
        "job.create",
        "job.update",
        "job.pause",
        "job.resume",
        "job.trigger",
        "job.cancel",
    ]
    assert {e.outcome for e in entries} == {"OK"}
    assert {e.target_id for e in entries} == {job_id}
    assert entries[1].detail == "changed schedule"
    assert entries[4].detail.startswith("execution ")


def test_reads_and_a_resume_dry_run_are_not_audited(deploy):
    job_id = deploy.post("/v1/jobs", CRON, format="json").json()["jobId"]
    deploy.post(f"/v1/jobs/{job_id}/pause")
    before = AuditEntry.objects.count()

    deploy.get("/v1/jobs")
    deploy.get(f"/v1/jobs/{job_id}")
    assert deploy.post(f"/v1/jobs/{job_id}/resume?dryRun=true").status_code == 200

    assert AuditEntry.objects.count() == before


def test_refused_invalid_and_not_found_requests_are_audited_with_their_reason(deploy, other_tenant, make_job):
    """A 409 is REFUSED, a 400 INVALID (naming the field), another tenant's job NOT_FOUND, filed
    under the caller's tenant and without the other job's name."""
    job_id = deploy.post("/v1/jobs", CRON, format="json").json()["jobId"]
    theirs = make_job(other_tenant, name="secret-payroll")

    assert deploy.post(f"/v1/jobs/{job_id}/resume").status_code == 409
    assert deploy.post("/v1/jobs", {**CRON, "schedule": "nope"}, format="json").status_code == 400
    assert deploy.post(f"/v1/jobs/{theirs.pk}/pause").status_code == 404

    refused, invalid, not_found = AuditEntry.objects.exclude(action="job.create", outcome="OK").order_by("id")
    assert (refused.action, refused.outcome, refused.target_id) == ("job.resume", "REFUSED", job_id)
    assert "ACTIVE" in refused.detail or "paused" in refused.detail.lower()
    assert (invalid.action, invalid.outcome) == ("job.create", "INVALID")
    assert invalid.detail.startswith("schedule:")
    assert (not_found.action, not_found.outcome, not_found.target_id) == ("job.pause", "NOT_FOUND", str(theirs.pk))
    assert not_found.tenant_id == deploy.token.tenant_id
    assert not_found.target_label == "" and not_found.job_id is None


def test_a_request_without_credentials_is_one_failed_authentication_row(client, caplog):
    """Issue 31, item 5: the row of a refused request was lost (AttributeError on the missing
    user, logged as "audit row of a failed API request not written"). A 401 is one row: from
    which address, to which path, and why; no action row beside it, nothing logged as lost."""
    response = client.post("/v1/jobs", CRON, content_type="application/json")

    assert response.status_code == 401
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome, entry.actor, entry.actor_kind) == ("auth.fail", "REFUSED", "anonymous", "api")
    assert (entry.target_type, entry.target_id, entry.tenant_id) == ("token", "", None)
    assert entry.source_ip == "127.0.0.1"
    assert entry.detail.startswith("POST /v1/jobs: ") and "credentials were not provided" in entry.detail
    assert str(entry.request_id) == response["X-Request-Id"]
    assert "not written" not in caplog.text


def test_a_wrong_token_is_recorded_by_its_prefix_on_any_method(tenant):
    """A guessed or mistyped token: its prefix (as tokens are told apart), for reads too."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer tw_Guessed0123456789")

    assert client.get("/v1/jobs").status_code == 401
    assert client.post("/v1/jobs", CRON, format="json").status_code == 401

    rows = list(AuditEntry.objects.order_by("id"))
    assert [(e.action, e.actor, e.target_id) for e in rows] == [("auth.fail", "token tw_Guessed", "tw_Guessed")] * 2
    assert [e.detail.split(":")[0] for e in rows] == ["GET /v1/jobs", "POST /v1/jobs"]
    assert "Invalid or revoked token" in rows[0].detail


def test_a_revoked_token_is_named_and_filed_under_its_tenant(deploy, tenant):
    """A revoked token still being used is news for its tenant: named as when it was live."""
    deploy.token.revoked_at = deploy.token.created_at
    deploy.token.save()

    assert deploy.post("/v1/jobs", CRON, format="json").status_code == 401

    entry = AuditEntry.objects.get()
    assert entry.actor == f"token deploy ({deploy.token.key_prefix}) of acme"
    assert (entry.action, entry.target_id, entry.tenant_id) == ("auth.fail", deploy.token.key_prefix, tenant.pk)


@pytest.mark.parametrize("header", ["Bearer hunter2-not-a-token", "Bearer tw_a tw_b", "Basic dXNlcjpwYXNz"])
def test_a_credential_not_of_a_tokens_form_is_recorded_without_any_of_it(db, header):
    """Only a token's prefix is kept: the first characters of another secret are not."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)

    assert client.delete("/v1/jobs/00000000-0000-0000-0000-000000000000").status_code == 401

    entry = AuditEntry.objects.get()
    assert (entry.action, entry.actor, entry.target_id) == ("auth.fail", "anonymous", "")
    assert "hunter2" not in entry.detail and "dXNl" not in entry.detail


def test_a_wrong_metrics_token_is_a_failed_authentication(client, settings):
    settings.TICKWORK_METRICS_TOKEN = "scrape-secret"

    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong")

    assert response.status_code == 401

    entry = AuditEntry.objects.get()
    assert (entry.action, entry.detail) == ("auth.fail", "GET /metrics: not the metrics token")
    assert str(entry.request_id) == response["X-Request-Id"]


def test_a_bulk_create_is_one_row_in_one_insert(deploy):
    """A batch of 50 jobs costs the audit one INSERT, and the row lists the jobs."""
    items = [{**CRON, "name": f"job-{i}"} for i in range(50)]
    with CaptureQueriesContext(connection) as queries:
        response = deploy.post("/v1/jobs/bulk", {"jobs": items}, format="json")

    assert response.status_code == 201
    audit_inserts = [q for q in queries.captured_queries if q["sql"].startswith('INSERT INTO "dashboard_auditentry"')]
    assert len(audit_inserts) == 1
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target_label, entry.outcome) == ("job.bulk_create", "50 jobs", "OK")
    assert entry.detail.startswith("created 50 jobs: ")


def test_a_job_create_costs_the_audit_one_insert_and_a_savepoint(deploy, monkeypatch):
    """The hot path: against the same request unaudited, the audit adds its INSERT, and the
    service's own transaction becomes a savepoint inside the request's (two statements)."""
    from web.api.jobs import JobListCreateApi

    def statements(name: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert deploy.post("/v1/jobs", {**CRON, "name": name}, format="json").status_code == 201
        return len(queries.captured_queries)

    statements("warm-up")  # the token's last_used_at touch, once a minute, is out of the way
    audited = statements("audited")
    monkeypatch.setattr(JobListCreateApi, "audit_actions", {})
    unaudited = statements("unaudited")

    assert audited - unaudited <= 3
    assert AuditEntry.objects.filter(action="job.create").count() == 2


def test_no_change_without_its_row(deploy, monkeypatch):
    """The row commits with the change: when it cannot be written, the job is not created either."""
    import web.audit

    def broken(**kwargs):
        raise RuntimeError("audit store down")

    monkeypatch.setattr(web.audit, "audit_record", broken)
    with pytest.raises(RuntimeError):
        deploy.post("/v1/jobs", CRON, format="json")

    assert not Job.objects.exists()


def test_execution_and_alert_rule_actions_are_audited(deploy, tenant, make_job, drive):
    dead = drive(make_job(tenant, name="flaky").executions.get(), "DEAD")
    assert deploy.post(f"/v1/executions/{dead.pk}/retry").status_code == 200
    pending = make_job(tenant, name="later").executions.get()
    assert deploy.post(f"/v1/executions/{pending.pk}/cancel").status_code == 202
    rule = deploy.post(
        "/v1/alerts/rules",
        {"name": "dead", "kind": "DEAD_LETTER", "channels": [{"type": "email", "to": "oncall@example.com"}]},
        format="json",
    )
    assert rule.status_code == 201, rule.json()
    rule_id = rule.json()["ruleId"]
    assert deploy.patch(f"/v1/alerts/rules/{rule_id}", {"enabled": False}, format="json").status_code == 200
    assert deploy.delete(f"/v1/alerts/rules/{rule_id}").status_code == 204

    rows = [(e.action, e.target_type, e.target_id, e.outcome) for e in AuditEntry.objects.order_by("id")]
    assert rows == [
        ("execution.retry", "execution", str(dead.pk), "OK"),
        ("execution.cancel", "execution", str(pending.pk), "OK"),
        ("alert_rule.create", "alert_rule", rule_id, "OK"),
        ("alert_rule.update", "alert_rule", rule_id, "OK"),
        ("alert_rule.delete", "alert_rule", rule_id, "OK"),
    ]
    retry = AuditEntry.objects.get(action="execution.retry")
    assert retry.job_id == dead.job_id and retry.target_label == "flaky #1"
