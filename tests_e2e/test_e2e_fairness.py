"""Fair admission with real processes (Celery prefork workers, dispatchers): a quiet tenant beside
a noisy one, weights, a concurrency limit under three dispatchers, priorities, a pool without
workers, and a worker that dies or stops. In-process: scheduling/tests/test_admission.py."""

import itertools
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from executions.models import Execution
from jobs.models import Priority
from pools.models import Worker
from tenants.services import tenant_create
from testing.fixtures import WORKER_OFFLINE_SECONDS
from testing.harness import execution_in, wait_for

pytestmark = pytest.mark.e2e


def _backlog(make_job, tenant, count, *, seconds: float, **fields) -> list:
    now = timezone.now()
    jobs = [make_job(tenant, run_at=now, handler="sleep", payload={"seconds": seconds}, **fields) for _ in range(count)]
    return list(Execution.objects.filter(job__in=jobs).values_list("pk", flat=True))


def _started_tenants(tenants) -> list[str]:
    rows = Execution.objects.filter(tenant__in=tenants, started_at__isnull=False).order_by("started_at")
    return [slug for slug in rows.values_list("tenant__slug", flat=True)]


def test_a_quiet_tenant_starts_within_two_seconds_beside_a_minute_of_backlog(live, tenant, other_tenant, make_job):
    """acme has 240 runs of 0.5 s due (two minutes of work for one slot) in the pool globex uses
    too; each of globex's few jobs starts within 2 s of being due."""
    live.worker(concurrency=2, wait=False)
    live.dispatcher()
    live.ready()
    backlog = _backlog(make_job, tenant, 240, seconds=0.5)
    wait_for(
        lambda: Execution.objects.filter(pk__in=backlog, started_at__isnull=False).count() >= 6,
        timeout=30,
        what="the backlog to be running",
    )
    lags = []
    for _ in range(3):
        job = make_job(other_tenant, run_at=timezone.now(), handler="noop")
        execution = Execution.objects.get(job=job)
        done = wait_for(lambda e=execution: execution_in(e.pk, "SUCCEEDED"), timeout=10, what="globex's job")
        lags.append((done.started_at - done.scheduled_for).total_seconds())
        time.sleep(0.5)
    assert max(lags) < 2.0, lags
    waiting = Execution.objects.filter(pk__in=backlog, state="PENDING").count()
    assert waiting > 100, (waiting, lags)  # the backlog was there all along


def test_weights_three_and_one_get_three_quarters_and_one_quarter_of_the_starts(live, make_job):
    heavy, light = tenant_create(slug="heavy"), tenant_create(slug="light")
    heavy.weight = 3
    heavy.save()
    _backlog(make_job, heavy, 60, seconds=0.1)
    _backlog(make_job, light, 60, seconds=0.1)
    live.worker(concurrency=4, wait=False)
    live.dispatcher()
    live.ready()
    wait_for(lambda: len(_started_tenants([heavy, light])) >= 60, timeout=60, what="60 starts")
    shares = Counter(_started_tenants([heavy, light])[:60])
    assert 0.65 <= shares["heavy"] / 60 <= 0.85, shares
    assert 0.15 <= shares["light"] / 60 <= 0.35, shares


def test_a_concurrency_limit_of_one_never_lets_two_runs_overlap_under_three_dispatchers(live, tenant, make_job):
    if connection.vendor != "postgresql":
        pytest.skip("three dispatchers on one SQLite file take turns anyway; the claim lock is PostgreSQL's")
    tenant.max_concurrent_executions = 1
    tenant.save()
    ids = _backlog(make_job, tenant, 12, seconds=0.2)
    live.worker(concurrency=4, wait=False)
    for _ in range(3):
        live.dispatcher()
    live.ready()
    wait_for(
        lambda: Execution.objects.filter(pk__in=ids, state="SUCCEEDED").count() == len(ids),
        timeout=60,
        what="every run to succeed",
    )
    runs = sorted(Execution.objects.filter(pk__in=ids).values_list("queued_at", "finished_at"))
    # None admitted before the one before it finished. The two times are stamped by different
    # processes, each on its own reading of the database's clock (off by up to half a round trip
    # each). A claim stamps queuedAt once it holds the claim lock (scheduling/admission.claim):
    # stamped with the time read before it waited for the lock, a queuedAt preceded the finish it
    # waited for by that wait (25 ms, then 150 ms, seen in CI with three dispatchers taking turns).
    skew = timedelta(milliseconds=100)
    for (_, finished), (queued, _) in itertools.pairwise(runs):
        assert queued >= finished - skew, "a run was admitted while another of the tenant's was not finished"


def test_a_high_job_starts_before_normal_and_low_backlogs(live, tenant, other_tenant, make_job, settings):
    live.worker(concurrency=1, wait=False)
    live.dispatcher()
    live.ready()
    low = _backlog(make_job, tenant, 15, seconds=0.2, priority=Priority.LOW)
    normal = _backlog(make_job, other_tenant, 15, seconds=0.2, priority=Priority.NORMAL)
    wait_for(
        lambda: Execution.objects.filter(pk__in=low + normal, state="SUCCEEDED").count() >= 2,
        timeout=30,
        what="the backlogs to be running",
    )
    high = Execution.objects.get(job=make_job(tenant, run_at=timezone.now(), handler="noop", priority=Priority.HIGH))
    done = wait_for(lambda: execution_in(high.pk, "SUCCEEDED"), timeout=10, what="the HIGH job")
    # Only what was already admitted when it came (one slot, plus the broker's headroom) went first.
    overtook = Execution.objects.filter(pk__in=low + normal, started_at__gt=high.created_at).filter(
        started_at__lt=done.started_at
    )
    assert overtook.count() <= settings.TICKWORK_ADMIT_HEADROOM * 1, list(overtook.values_list("priority", flat=True))


def test_a_pool_without_workers_admits_nothing_and_says_so(live, tenant, make_job, api):
    live.dispatcher()
    live.ready()
    execution = Execution.objects.get(job=make_job(tenant, run_at=timezone.now()))
    time.sleep(1.5)
    body = api.get(f"/v1/executions/{execution.pk}").json()
    assert (body["state"], body["pendingReason"]) == ("PENDING", "NO_WORKERS")
    (pool,) = api.get("/v1/pools").json()["results"]
    assert (pool["workers"], pool["slots"], pool["dueBacklog"]) == (0, 0, 1)
    live.worker(concurrency=1)
    wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=15, what="the run, once a worker serves it")


def test_a_killed_worker_frees_its_capacity_after_the_offline_bound_and_a_stopped_one_at_once(live, api):
    first, second = live.worker(concurrency=1), live.worker(concurrency=2)

    def slots() -> int:
        (pool,) = api.get("/v1/pools").json()["results"]
        return pool["slots"]

    wait_for(lambda: slots() == 3, timeout=10, what="both workers registered")
    first.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: slots() == 2, timeout=WORKER_OFFLINE_SECONDS + 5, what="the killed worker to go offline")
    assert time.monotonic() - killed_at >= WORKER_OFFLINE_SECONDS - 1.0  # by the bound, not before
    second.signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    wait_for(lambda: slots() == 0, timeout=5, what="the stopped worker to deregister")
    assert time.monotonic() - stopped_at < WORKER_OFFLINE_SECONDS
    assert Worker.objects.filter(stopped_at__isnull=False).count() == 1
    assert timezone.now() - Worker.objects.get(stopped_at__isnull=False).stopped_at < timedelta(seconds=10)
