"""Tenant isolation: a token sees only its tenant's objects. Another tenant's id answers 404 on every
endpoint that takes one, and leaves the object as it was; lists never show another tenant's objects."""

import pytest
from django.utils import timezone

from executions.models import Execution, ExecutionEvent
from jobs.models import Job
from scheduling.job_changes import job_pause

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Staff and member users get passwords; the production hasher would cost a second each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


CRON_BODY = {"name": "hijacked", "type": "CRON", "schedule": "5 * * * *", "target": {"handler": "noop"}}

# (method, path with placeholders, body): every endpoint that takes an id. The placeholder names the
# other tenant's object the request aims at, chosen so that its owner's request would succeed.
BY_ID = [
    ("get", "/v1/jobs/{active_job}", None),
    ("put", "/v1/jobs/{active_job}", CRON_BODY),
    ("patch", "/v1/jobs/{active_job}", {"name": "hijacked"}),
    ("delete", "/v1/jobs/{active_job}", None),
    ("post", "/v1/jobs/{active_job}/pause", None),
    ("post", "/v1/jobs/{paused_job}/resume", None),
    ("post", "/v1/jobs/{active_job}/trigger", None),
    ("get", "/v1/jobs/{active_job}/executions", None),
    ("get", "/v1/executions/{pending_execution}", None),
    ("post", "/v1/executions/{pending_execution}/cancel", None),
    ("post", "/v1/executions/{dead_execution}/retry", None),
    ("get", "/v1/jobs/{workflow_job}/runs", None),
    ("get", "/v1/runs/{run}", None),
    ("post", "/v1/runs/{run}/cancel", None),
]
IDS = [f"{method} {path}" for method, path, _ in BY_ID]


@pytest.fixture
def others(other_tenant, make_job, drive) -> dict[str, str]:
    """The other tenant's objects, by placeholder: an ACTIVE and a PAUSED cron job, the active one's
    PENDING execution, and a DEAD execution of a one-off job."""
    active = make_job(other_tenant, type="CRON", name="globex secret schedule")
    paused = make_job(other_tenant, type="CRON", name="globex paused")
    job_pause(job=paused, now=timezone.now())
    dead = drive(make_job(other_tenant, name="globex one-off").executions.get(), "DEAD")
    step = {"name": "only", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []}
    flow = make_job(other_tenant, name="globex flow", workflow={"steps": [step]}, pool="", handler="")
    return {
        "active_job": str(active.pk),
        "paused_job": str(paused.pk),
        "pending_execution": str(active.executions.get().pk),
        "dead_execution": str(dead.pk),
        "workflow_job": str(flow.pk),
        "run": str(flow.runs.get().pk),
    }


def snapshot(tenant) -> tuple:
    return (
        list(Job.objects.filter(tenant=tenant).order_by("pk").values()),
        list(Execution.objects.filter(tenant=tenant).order_by("pk").values()),
        ExecutionEvent.objects.filter(execution__tenant=tenant).count(),
    )


def call(client, method, path, body):
    if body is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, body, format="json")


@pytest.mark.parametrize(("method", "path", "body"), BY_ID, ids=IDS)
def test_another_tenants_id_is_404_and_changes_nothing(api, other_tenant, others, method, path, body):
    """Through acme's token, each of globex's ids is 404 — not 403, which would confirm that it
    exists — and globex's jobs, executions and history are exactly as they were."""
    before = snapshot(other_tenant)

    response = call(api, method, path.format(**others), body)

    assert response.status_code == 404
    assert "globex" not in response.content.decode()
    assert snapshot(other_tenant) == before


@pytest.mark.parametrize(("method", "path", "body"), BY_ID, ids=IDS)
def test_the_same_requests_by_the_owner_succeed(other_api, others, method, path, body):
    """Control for the matrix above: the owner's token gets a success from each of those requests,
    so the 404s are isolation, not bad fixtures."""
    response = call(other_api, method, path.format(**others), body)

    assert response.status_code in (200, 202), response.content


def test_jobs_list_shows_only_the_callers_jobs_whatever_the_filter(api, tenant, others, make_job):
    """acme's list has acme's job only, also when filtering by globex's tenant, name or state."""
    mine = make_job(tenant, type="CRON", name="acme schedule")

    for query in ("", "?tenant=globex", "?name=globex", "?state=PAUSED", "?type=CRON", "?pageSize=1"):
        results = api.get(f"/v1/jobs{query}").json()["results"]
        assert {job["jobId"] for job in results} <= {str(mine.pk)}, query
    assert [job["jobId"] for job in api.get("/v1/jobs").json()["results"]] == [str(mine.pk)]


def test_executions_list_shows_only_the_callers_executions_whatever_the_filter(api, tenant, others, make_job):
    """acme's execution list never shows globex's executions: not by jobId, state, pool or tenant."""
    mine = make_job(tenant).executions.get()

    for query in (
        "",
        f"?jobId={others['active_job']}",
        "?state=DEAD",
        "?state=PENDING",
        "?pool=default",
        "?tenant=globex",
    ):
        results = api.get(f"/v1/executions{query}").json()["results"]
        assert {e["executionId"] for e in results} <= {str(mine.pk)}, query
    assert api.get(f"/v1/executions?jobId={others['active_job']}").json()["results"] == []


def test_an_idempotency_key_is_per_tenant(api, other_api):
    """The same Idempotency-Key in two tenants makes two jobs; neither sees the other's."""
    body = {"name": "x", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}

    mine = api.post("/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    theirs = other_api.post("/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="shared")

    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["jobId"] != theirs.json()["jobId"]
    assert (mine.json()["tenant"], theirs.json()["tenant"]) == ("acme", "globex")


def test_a_token_cannot_create_in_another_tenant(api, other_tenant):
    """Naming another tenant in the body is refused with 400; nothing is created anywhere."""
    body = {"name": "x", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}, "tenant": "globex"}

    response = api.post("/v1/jobs", body, format="json")

    assert response.status_code == 400
    assert "tenant" in response.json()
    assert Job.objects.count() == 0


def test_a_staff_session_sees_every_tenant(admin_client, tenant, other_tenant, make_job):
    """A staff user's session (admin, dashboard) lists the jobs and executions of all tenants."""
    make_job(tenant)
    make_job(other_tenant)

    jobs = admin_client.get("/v1/jobs").json()["results"]
    executions = admin_client.get("/v1/executions").json()["results"]

    assert {job["tenant"] for job in jobs} == {"acme", "globex"}
    assert len(executions) == 2


def test_a_member_session_sees_only_its_tenants(client, django_user_model, tenant, other_tenant, make_job):
    """A non-staff user sees the tenants it is a member of, and another tenant's job is 404."""
    mine = make_job(tenant)
    theirs = make_job(other_tenant)
    user = django_user_model.objects.create_user("member", password="pw-member-1234")
    tenant.members.add(user)
    client.force_login(user)

    jobs = client.get("/v1/jobs").json()["results"]

    assert [job["jobId"] for job in jobs] == [str(mine.pk)]
    assert client.get(f"/v1/jobs/{theirs.pk}").status_code == 404
