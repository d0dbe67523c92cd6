"""The due backlog (readmodels/backlog.py) is work due and waiting for a slot: not what a paused
job or a paused pool holds, which is counted apart, nor work not due yet (issue 31, item 2: a
paused every-minute job showed as a backlog of 2, 316 s old, with a slot free, for ever).
GET /v1/pools, /metrics, the pools' minute samples and the overview read it from there."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from maintenance.services import pool_history
from pools.models import PoolSample
from readmodels.backlog import due_work
from readmodels.selectors import pool_overviews
from scheduling.job_changes import job_pause
from scheduling.pool_pauses import pool_pause

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _two_pools(settings):
    settings.TICKWORK_POOLS = ["default", "billing"]


def test_a_paused_every_minute_job_is_no_backlog_after_its_next_fire(tenant, make_job):
    """The issue's case: a `* * * * *` job, paused; five minutes later its fire is due and held."""
    made = timezone.now()
    job = make_job(tenant, type="CRON", schedule="* * * * *", now=made)
    job_pause(job=job, now=made)
    later = made + timedelta(minutes=5)
    assert Execution.objects.get(job=job).available_at <= later

    (default,) = [p for p in pool_overviews(scope=None, now=later) if p.pool == "default"]

    assert (default.due_backlog, default.oldest_due_at, default.paused_due) == (0, None, 1)


def test_paused_jobs_paused_pools_and_work_not_due_are_told_apart(tenant, other_tenant, make_job):
    """Per pool: an active job's due execution is backlog, and its age is the backlog's oldest
    even when a paused job's due execution is older; a paused pool's due work is all paused;
    work not due yet is in neither. By (pool, tenant) the same, for the minute samples."""
    now = timezone.now()
    waiting = make_job(tenant, run_at=now - timedelta(minutes=1), now=now).executions.get()
    held = make_job(tenant, run_at=now - timedelta(minutes=10), now=now)
    job_pause(job=held, now=now)
    make_job(tenant, run_at=now + timedelta(minutes=1), now=now)  # not due
    make_job(other_tenant, run_at=now - timedelta(minutes=2), pool="billing", now=now)
    pool_pause(pool="billing", by="user ops", now=now)

    pools = {p.pool: p for p in pool_overviews(scope=None, now=now)}

    assert (pools["default"].due_backlog, pools["default"].paused_due) == (1, 1)
    assert pools["default"].oldest_due_at == waiting.available_at
    assert (pools["billing"].due_backlog, pools["billing"].oldest_due_at, pools["billing"].paused_due) == (0, None, 1)
    by_tenant = due_work(Execution.objects.all(), now=now, by=("pool", "tenant_id"))
    assert {key: (d.backlog, d.paused) for key, d in by_tenant.items()} == {
        ("default", tenant.pk): (1, 1),
        ("billing", other_tenant.pk): (0, 1),
    }
    # A tenant's view counts its own.
    mine = {p.pool: p for p in pool_overviews(scope=[other_tenant.pk], now=now)}
    assert (mine["default"].due_backlog, mine["default"].paused_due) == (0, 0)


def test_the_minute_samples_record_the_backlog_without_paused_work(tenant, make_job, monkeypatch):
    """The overview's "Due backlog by pool" chart reads these."""
    monkeypatch.setattr(pool_history, "_recorded", {})
    now = timezone.now()
    make_job(tenant, run_at=now - timedelta(minutes=3), now=now)
    job_pause(job=make_job(tenant, run_at=now - timedelta(minutes=3), now=now), now=now)

    pool_history.record(now=now + timedelta(minutes=1))

    total = PoolSample.objects.get(pool="default", tenant__isnull=True)
    mine = PoolSample.objects.get(pool="default", tenant=tenant)
    assert (total.due, mine.due) == (1, 1)
