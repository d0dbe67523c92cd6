"""`pendingReason` / `pendingDetail` on executions and `GET /v1/pools`, read from outside."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from executions.models import Execution
from scheduling.job_changes import job_pause
from testing.steps import capacity, claim, start

pytestmark = pytest.mark.django_db


def _reason(api, execution) -> tuple[str | None, str | None]:
    body = api.get(f"/v1/executions/{execution.pk}").json()
    return body["pendingReason"], body["pendingDetail"]


def _execution(make_job, tenant, **fields) -> Execution:
    return Execution.objects.get(job=make_job(tenant, **fields))


def test_each_reason_to_wait(exact_admission, api, tenant, other_tenant, make_job):
    now = timezone.now()
    due = _execution(make_job, tenant, run_at=now - timedelta(seconds=5))
    assert _reason(api, due)[0] == "NO_WORKERS"
    assert "no live worker serves pool default" in _reason(api, due)[1]

    later = _execution(make_job, tenant, run_at=now + timedelta(hours=2))
    assert _reason(api, later) == ("NOT_DUE", f"due at {later.available_at.isoformat()} (in 1 h 59 min)")

    paused = _execution(make_job, tenant, run_at=now - timedelta(seconds=5))
    job_pause(job=paused.job, now=now)
    assert _reason(api, paused)[0] == "JOB_PAUSED"

    # One slot; globex's execution, due first, takes it. acme's waits behind it: a full pool.
    theirs = _execution(make_job, other_tenant, run_at=now - timedelta(seconds=60))
    (sent,) = claim(now, slots=1)
    capacity(now, slots=1)
    assert sent.execution_id == str(theirs.pk)
    assert _reason(api, due) == (
        "POOL_AT_CAPACITY",
        "pool default is full (1 admitted for 1 slots, 0 busy); it is next in line for a slot",
    )
    # A globex execution due before acme's, in a full pool: other tenants' turn.
    _execution(make_job, other_tenant, run_at=now - timedelta(seconds=30))
    reason, detail = _reason(api, due)
    assert reason == "FAIR_SHARE" and "1 other tenant(s) with due work" in detail

    # Admitted: on the broker until a worker takes it; running: nothing to wait for.
    assert api.get(f"/v1/executions/{theirs.pk}").status_code == 404  # another tenant's
    other = APIClient()
    other.force_authenticate(get_user_model().objects.create_user("ops", is_staff=True))
    assert _reason(other, theirs)[0] == "ON_BROKER"
    start(theirs.pk, now=now)
    assert _reason(other, theirs) == (None, None)


def test_a_tenant_at_its_concurrency_limit(api, tenant, make_job):
    tenant.max_concurrent_executions = 1
    tenant.save()
    now = timezone.now()
    first = _execution(make_job, tenant, run_at=now - timedelta(seconds=2))
    second = _execution(make_job, tenant, run_at=now - timedelta(seconds=1))
    claim(now)
    assert Execution.objects.get(pk=first.pk).state == "QUEUED"
    assert _reason(api, second) == ("TENANT_CONCURRENCY_LIMIT", "tenant acme runs 1 of its 1 allowed executions")
    listed = api.get("/v1/executions?state=PENDING").json()["results"]
    assert [(e["executionId"], e["pendingReason"]) for e in listed] == [(str(second.pk), "TENANT_CONCURRENCY_LIMIT")]


def test_pools_show_workers_and_each_tenants_own_backlog(api, other_api, tenant, other_tenant, make_job):
    now = timezone.now()
    for _ in range(3):
        _execution(make_job, tenant, run_at=now - timedelta(seconds=10))
    _execution(make_job, other_tenant, run_at=now - timedelta(seconds=20))
    _execution(make_job, tenant, run_at=now + timedelta(hours=1))  # not due: not backlog
    capacity(timezone.now(), slots=4)

    (mine,) = api.get("/v1/pools").json()["results"]
    assert mine["pool"] == "default"
    assert (mine["workers"], mine["slots"], mine["busy"], mine["admitted"], mine["dueBacklog"]) == (1, 4, 0, 0, 3)
    assert 9 < mine["oldestDueAgeSec"] < 60
    (theirs,) = other_api.get("/v1/pools").json()["results"]
    assert theirs["dueBacklog"] == 1 and theirs["oldestDueAgeSec"] >= 19

    claim(timezone.now(), slots=4)
    (mine,) = api.get("/v1/pools").json()["results"]
    assert (mine["admitted"], mine["queued"], mine["dueBacklog"], mine["oldestDueAgeSec"]) == (3, 3, 0, None)


def test_pools_need_a_token(client):
    assert client.get("/v1/pools").status_code in (401, 403)


def test_pool_status_prints_every_tenants_work_for_an_autoscaler(tenant, other_tenant, make_job):
    import json
    from io import StringIO

    from django.core.management import call_command

    now = timezone.now()
    _execution(make_job, tenant, run_at=now - timedelta(seconds=10))
    _execution(make_job, other_tenant, run_at=now - timedelta(seconds=10))
    capacity(now, slots=2)
    out = StringIO()
    call_command("pool_status", stdout=out)
    (pool,) = json.loads(out.getvalue())["results"]
    assert (pool["pool"], pool["slots"], pool["dueBacklog"]) == ("default", 2, 2)
