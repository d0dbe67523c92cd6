"""POST /v1/pools/{pool}/pause and /resume: staff only (403 for a tenant's token or a member),
404 for a pool that does not exist, 400 naming `reason` when it is not a short string; GET
/v1/pools and /v1/health show the pause."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from executions.models import Execution
from pools.models import PoolPause
from scheduling.job_changes import job_pause

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("ops", is_staff=True))
    return client


def _pool(client, name="default") -> dict:
    return next(p for p in client.get("/v1/pools").json()["results"] if p["pool"] == name)


def test_staff_pause_and_resume_a_pool_and_every_caller_sees_it(staff, api, tenant, make_job):
    make_job(tenant, run_at=timezone.now() - timedelta(seconds=1))
    assert _pool(api)["paused"] is False

    response = staff.post("/v1/pools/default/pause", {"reason": "db failover"}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert (body["pool"], body["paused"], body["pausedBy"], body["pauseReason"]) == (
        "default",
        True,
        "user ops",
        "db failover",
    )
    assert body["pausedAt"] is not None
    # Its due work waits on the pause, not on a slot: no backlog for the autoscaler.
    assert (body["dueBacklog"], body["oldestDueAgeSec"], body["pausedDue"]) == (0, None, 1)
    seen = _pool(api)  # a tenant sees the pool is paused (its work waits on it), not who did it less
    assert seen["paused"] is True and seen["pauseReason"] == "db failover"
    (execution,) = api.get("/v1/executions?state=PENDING").json()["results"]
    assert execution["pendingReason"] == "POOL_PAUSED"
    health = APIClient().get("/v1/health").json()
    assert health["roles"]["workers"]["paused"] == ["default"]

    resumed = staff.post("/v1/pools/default/resume")
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    assert (resumed.json()["dueBacklog"], resumed.json()["pausedDue"]) == (1, 0)
    assert resumed.json()["pausedAt"] is None and not PoolPause.objects.exists()


def test_a_pause_without_a_body_and_a_repeated_pause_change_nothing_more(staff):
    assert staff.post("/v1/pools/default/pause").status_code == 200
    again = staff.post("/v1/pools/default/pause", {"reason": "later"}, format="json")
    assert again.status_code == 200 and again.json()["pauseReason"] is None
    assert staff.post("/v1/pools/default/resume").status_code == 200
    assert staff.post("/v1/pools/default/resume").status_code == 200


def test_only_staff_may_pause_or_resume(api, tenant):
    member = APIClient()
    user = get_user_model().objects.create_user("ada")
    tenant.members.add(user)
    member.force_authenticate(user)

    for client in (api, member):
        for action in ("pause", "resume"):
            response = client.post(f"/v1/pools/default/{action}")
            assert response.status_code == 403, (client, action)
            assert "only staff" in response.json()["detail"]
    assert not PoolPause.objects.exists()
    assert APIClient().post("/v1/pools/default/pause").status_code in (401, 403)


def test_an_unknown_pool_is_404_and_a_bad_reason_is_400_naming_the_field(staff):
    assert staff.post("/v1/pools/nope/pause").status_code == 404
    assert staff.post("/v1/pools/nope/resume").status_code == 404
    for bad, field in (({"reason": "x" * 501}, "reason"), ({"reason": None}, "reason"), ({"why": "x"}, "why")):
        response = staff.post("/v1/pools/default/pause", bad, format="json")
        assert response.status_code == 400 and field in response.json(), bad
    assert not PoolPause.objects.exists()
    assert not Execution.objects.exists()


def test_pool_pause_and_resume_through_the_api_are_audited_with_who_and_why(staff, api):
    """Every actor's action is in the audit: a staff user's pause (with its reason) and resume,
    and a tenant token's refused attempt."""
    from audit.models import AuditEntry

    staff.post("/v1/pools/default/pause", {"reason": "db failover"}, format="json")
    staff.post("/v1/pools/default/resume")
    api.post("/v1/pools/default/pause", {}, format="json")

    rows = list(AuditEntry.objects.filter(target_type="pool").order_by("id"))
    assert [(r.action, r.target_id, r.actor, r.outcome, r.actor_kind) for r in rows[:2]] == [
        ("pool.pause", "default", "user ops", "OK", "api"),
        ("pool.resume", "default", "user ops", "OK", "api"),
    ]
    assert rows[0].detail == "db failover"
    assert rows[2].action == "pool.pause" and rows[2].outcome == "REFUSED" and rows[2].actor.startswith("token ")


def test_a_paused_jobs_due_work_is_no_backlog_in_the_api_or_the_metrics(api, tenant, make_job, settings):
    """Issue 31, item 2: the autoscaling signal counts only due work waiting for a slot. A paused
    job's due execution is `pausedDue`, and does not age the pool; an active one's is backlog."""
    settings.TICKWORK_METRICS_TOKEN, settings.TICKWORK_METRICS_CACHE_SECONDS = "metrics-token", 0
    now = timezone.now()
    job_pause(job=make_job(tenant, run_at=now - timedelta(minutes=5), now=now), now=now)

    pool = _pool(api)
    assert (pool["dueBacklog"], pool["oldestDueAgeSec"]) == (0, None)
    assert pool["pausedDue"] == 1
    metrics = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-token").content.decode()
    assert 'tickwork_pool_due_backlog{pool="default"} 0.0' in metrics
    assert 'tickwork_pool_oldest_due_age_seconds{pool="default"} 0.0' in metrics
    assert 'tickwork_pool_paused_due{pool="default"} 1.0' in metrics

    make_job(tenant, run_at=now - timedelta(seconds=30), now=now)
    pool = _pool(api)
    assert (pool["dueBacklog"], pool["pausedDue"]) == (1, 1) and 29 < pool["oldestDueAgeSec"] < 120
