"""The Workers page and the overview's fleet (dashboard/fleet/, dashboard/overview/charts.py)
through the Django test client: the registry's workers with their last hour's runs counted
over the caller's tenants only, offline ones flagged, the pools' pause and resume (staff only,
with a confirm, audited), and the overview's chart range."""

import json
from datetime import timedelta

import pytest

from dashboard.models import AuditEntry
from executions.clock import db_now
from executions.models import Execution
from pools import registry
from pools.models import PoolPause

pytestmark = pytest.mark.django_db


def _worker(host: str, *, pid: int, children=(), seen_ago: float = 0, stopped: bool = False) -> int:
    now = db_now()
    row = registry.register(hostname=host, pid=pid, pools=["default"], slots=4, now=now, pids=children)
    registry.beat(worker_id=row, busy=1, processed=7, rate=0.5, now=now - timedelta(seconds=seen_ago))
    if stopped:
        registry.deregister(worker_id=row, now=now)
    return row


def _ran(execution, worker_id: str) -> None:
    Execution.objects.filter(pk=execution.pk).update(worker_id=worker_id, finished_at=db_now() - timedelta(minutes=5))


def test_the_workers_page_lists_the_registry_and_counts_each_workers_runs_in_scope(
    member_client, staff_client, tenant, other_tenant, make_job, drive
):
    """A run names the pool process that ran it ("host:pid"); the page counts it for the worker
    that reported that pid. A member counts only its tenants' runs; staff all of them."""
    _worker("alpha", pid=100, children=[101, 102])
    _worker("beta", pid=200, seen_ago=600)  # not seen within the bound: offline
    _worker("gamma", pid=300, stopped=True)  # stopped cleanly: offline at once
    _ran(drive(make_job(tenant).executions.get(), "SUCCEEDED"), "alpha:101")
    _ran(drive(make_job(tenant, handler="fail").executions.get(), "DEAD"), "alpha:102")
    _ran(drive(make_job(other_tenant).executions.get(), "SUCCEEDED"), "alpha:101")
    running = drive(make_job(tenant, name="long export").executions.get(), "RUNNING")
    Execution.objects.filter(pk=running.pk).update(worker_id="alpha:102")

    page = member_client.get("/dashboard/workers/")
    assert page.status_code == 200
    workers = {w.name: w for w in page.context["workers"]}
    assert [w.name for w in page.context["workers"]] == ["alpha:100", "beta:200", "gamma:300"]  # live first
    alpha = workers["alpha:100"]
    assert alpha.live and (alpha.processed, alpha.failed, alpha.utilisation) == (2, 1, 25)
    assert [e["job__name"] for e in alpha.running] == ["long export"]
    assert not workers["beta:200"].live and workers["beta:200"].offline_reason == "not seen"
    assert not workers["gamma:300"].live and workers["gamma:300"].offline_reason == "stopped"
    html = page.content.decode()
    assert html.count('data-testid="worker-offline"') == 2
    assert "offline · stopped" in html and "offline · not seen" in html
    assert 'data-testid="pool-pause-default"' not in html  # a member may not pause a pool

    staff = {w.name: w for w in staff_client.get("/dashboard/workers/").context["workers"]}
    assert staff["alpha:100"].processed == 3

    table = member_client.get("/dashboard/workers/table")  # what the open page reads again
    assert table.status_code == 200 and 'id="workers-table"' in table.content.decode()
    assert "<html" not in table.content.decode()


def test_the_overview_worker_panel_comes_from_the_registry(staff_client):
    _worker("alpha", pid=100)
    _worker("beta", pid=200, stopped=True)

    page = staff_client.get("/dashboard/")

    assert [w.name for w in page.context["workers"]] == ["alpha:100", "beta:200"]
    assert page.context["live_workers"] == 1
    assert "1 live worker" in page.content.decode()


def test_staff_pause_and_resume_a_pool_from_the_page_and_each_is_audited(staff_client, tenant, make_job):
    make_job(tenant, run_at=db_now() - timedelta(seconds=1))
    page = staff_client.get("/dashboard/workers/").content.decode()
    assert 'data-testid="pool-pause-default"' in page and "data-confirm=" in page

    response = staff_client.post("/dashboard/pools/default/pause", {"reason": "broker maintenance"})

    assert response.status_code == 302 and response["Location"] == "/dashboard/workers/"
    pause = PoolPause.objects.get()
    assert (pause.pool, pause.paused_by, pause.reason) == ("default", "dashboard olivia", "broker maintenance")
    page = staff_client.get("/dashboard/workers/").content.decode()
    assert 'data-testid="pool-paused"' in page and "broker maintenance" in page
    assert 'data-testid="overview-pool-paused"' in staff_client.get("/dashboard/").content.decode()
    waiting = staff_client.get("/dashboard/executions/?state=PENDING").content.decode()
    assert "POOL_PAUSED" in waiting or "pool default is paused" in waiting

    assert staff_client.post("/dashboard/pools/default/resume").status_code == 302
    assert not PoolPause.objects.exists()
    audit = list(AuditEntry.objects.order_by("at", "id").values_list("action", "target_type", "target_id", "outcome"))
    assert audit == [("pool.pause", "pool", "default", "OK"), ("pool.resume", "pool", "default", "OK")]
    assert AuditEntry.objects.get(action="pool.pause").detail == "broker maintenance"


def test_a_member_may_not_pause_a_pool_and_an_unknown_pool_or_action_is_404(member_client, staff_client):
    assert member_client.post("/dashboard/pools/default/pause").status_code == 403
    assert staff_client.post("/dashboard/pools/nope/pause").status_code == 404
    assert staff_client.post("/dashboard/pools/default/explode").status_code == 404
    assert staff_client.get("/dashboard/pools/default/pause").status_code == 405
    assert not PoolPause.objects.exists() and not AuditEntry.objects.exists()


@pytest.mark.parametrize(("asked", "shown", "points"), [("", "1h", 60), ("24h", "24h", 96), ("7d", "7d", 84)])
def test_the_overview_charts_take_their_range_from_the_url(staff_client, asked, shown, points):
    page = staff_client.get(f"/dashboard/?range={asked}")

    data = page.context["chart_data"]
    assert data["range"] == shown and len(data["minutes"]) == points
    assert len(data["succeeded"]) == points and len(data["p99"]) == points
    html = page.content.decode()
    assert f'data-range="{shown}" aria-current="true"' in html
    assert json.loads(html.split('id="chart-data" type="application/json">')[1].split("</script>")[0])["range"] == shown


def test_an_unknown_range_falls_back_to_the_hour(staff_client):
    assert staff_client.get("/dashboard/?range=1y").context["chart_data"]["range"] == "1h"
