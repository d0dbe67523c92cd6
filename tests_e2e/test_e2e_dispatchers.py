"""Dispatchers that add throughput, with real processes: two dispatchers claim a backlog spread over
two pools at the same time (each pool's claims under its own lock, scheduling/admission.py), with
no execution admitted twice and a capped tenant's limit exact across the pools."""

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from executions.models import Execution
from jobs.models import Job
from store.postgres.admission import PostgresAdmission
from testing.harness import database_url, wait_for
from testing.steps import IN_PROCESS_WORKER, capacity

pytestmark = pytest.mark.e2e
PER_POOL = 4_000
CAP, CAPPED_PER_POOL = 7, 300


def _backlog(tenant, pool: str, n: int, *, due) -> None:
    jobs = Job.objects.bulk_create(
        [
            Job(tenant=tenant, name=f"{pool} {i}", type="ONCE", run_at=due, next_fire_at=due, pool=pool, handler="noop")
            for i in range(n)
        ],
        batch_size=2000,
    )
    Execution.objects.bulk_create(
        [
            Execution(job=job, tenant_id=tenant.pk, pool=pool, priority=1, scheduled_for=due, available_at=due)
            for job in jobs
        ],
        batch_size=2000,
    )


class _Watch(threading.Thread):
    """Samples, on a connection of its own, how many claims hold a pool's claim lock at once and the
    capped tenant's QUEUED + RUNNING; and keeps the stand-in worker live meanwhile."""

    def __init__(self, capped_id: int) -> None:
        super().__init__(daemon=True)
        self.capped_id, self.done = capped_id, threading.Event()
        self.most_claims, self.most_capped, self.samples = 0, 0, 0

    def run(self) -> None:
        with psycopg.connect(database_url().replace("postgres://", "postgresql://"), autocommit=True) as db:
            beat = 0.0
            while not self.done.is_set():
                if time.monotonic() - beat > 0.5:
                    db.execute("UPDATE pools_worker SET last_seen_at = now() WHERE hostname = %s", [IN_PROCESS_WORKER])
                    beat = time.monotonic()
                ((claims,),) = db.execute(
                    "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND classid = %s AND objsubid = 2 AND objid <> 0",
                    [PostgresAdmission.CLAIM_LOCKS],
                ).fetchall()
                ((capped,),) = db.execute(
                    "SELECT count(*) FROM executions_execution WHERE tenant_id = %s AND state IN ('QUEUED', 'RUNNING')",
                    [self.capped_id],
                ).fetchall()
                self.most_claims, self.most_capped = max(self.most_claims, claims), max(self.most_capped, capped)
                self.samples += 1
                self.done.wait(0.002)


def test_two_dispatchers_claim_two_pools_side_by_side_once_each_within_a_capped_tenants_limit(
    live, tenant, other_tenant, settings
):
    if connection.vendor != "postgresql":
        pytest.skip("claims of two pools overlap on PostgreSQL only (SQLite: one writer at a time)")
    settings.TICKWORK_POOLS = ["a", "b"]
    other_tenant.max_concurrent_executions = CAP
    other_tenant.save()
    later = timezone.now() + timedelta(days=1)
    for pool in ("a", "b"):
        _backlog(tenant, pool, PER_POOL, due=later)
        _backlog(other_tenant, pool, CAPPED_PER_POOL, due=later)
    # A stand-in worker with room for it all, that nothing consumes: this is about the claims.
    capacity(timezone.now(), slots=100_000, pools=["a", "b"])
    dispatchers = [live.dispatcher(env={"TICKWORK_POOLS": "a,b"}) for _ in range(2)]
    live.ready()
    watch = _Watch(other_tenant.pk)
    watch.start()

    # All due at one instant, in one statement: no dispatcher sees a part.
    Execution.objects.update(available_at=timezone.now(), scheduled_for=timezone.now())
    try:
        wait_for(
            lambda: Execution.objects.filter(tenant=tenant, state="QUEUED").count() == 2 * PER_POOL,
            timeout=120,
            interval=0.5,
            what="the backlog to be claimed",
        )
        time.sleep(0.5)  # a look or two more: the capped tenant stays at its limit
    finally:
        watch.done.set()
        watch.join()

    assert watch.most_claims >= 2, f"no two claims held their pools' locks at once ({watch.samples} samples)"
    assert not Execution.objects.filter(state="QUEUED").exclude(lease_token=1).exists()  # none claimed twice
    assert watch.most_capped == CAP, f"the capped tenant had {watch.most_capped} admitted at once (limit {CAP})"
    assert Execution.objects.filter(tenant=other_tenant, state="QUEUED").count() == CAP
    print(f"claims at once: {watch.most_claims}; capped tenant at most {watch.most_capped}; {watch.samples} samples")
    claims = [" ".join(d.log().split("claimed ")[1:]) for d in dispatchers]
    assert all(claims), f"a dispatcher claimed nothing: {claims}"
