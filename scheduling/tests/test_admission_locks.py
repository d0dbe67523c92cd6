"""Claims of different pools run side by side (each under its pool's lock), and what spans pools
stays exact: two claims, each in a thread with a connection of its own, on PostgreSQL (SQLite has
one writer at a time, so its claims never overlap)."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from executions.models import Execution
from scheduling.admission import claim
from store import store
from testing.steps import capacity

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_pools(settings):
    if connection.vendor != "postgresql":
        pytest.skip("claims of two pools overlap on PostgreSQL only (SQLite: one writer at a time)")
    settings.TICKWORK_POOLS = ["a", "b"]


def _claims_that_meet(monkeypatch) -> tuple[list, list, threading.Barrier]:
    """Two claims at once, each in its own transaction; each one, once it holds its first pool's
    lock, waits until the other holds one too, which only claims that do not wait on each other
    can both reach."""
    barrier = threading.Barrier(2, timeout=10)
    claim_pool = type(store()).claim_pool
    local = threading.local()

    def meeting(self, pool, **kwargs):
        admitted = claim_pool(self, pool, **kwargs)
        if admitted is not None and not getattr(local, "met", False):
            local.met = True
            barrier.wait()
        return admitted

    monkeypatch.setattr(type(store()), "claim_pool", meeting)
    claimed, errors = [], []

    def one_claim() -> None:
        try:
            with transaction.atomic():
                moved = claim(
                    now=timezone.now(), limit=1000, publish_grace=timedelta(seconds=30), limit_of=lambda pool, load: 10
                ).executions
            claimed.append(moved)
        except Exception as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one_claim) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    return claimed, errors, barrier


def test_two_claims_of_two_pools_overlap_and_admit_each_execution_once(two_pools, tenant, make_job, monkeypatch):
    now = timezone.now()
    for pool in ("a", "b"):
        for _ in range(12):
            make_job(tenant, pool=pool, run_at=now - timedelta(seconds=1))
    capacity(now, slots=5, pools=["a", "b"])

    claimed, _, barrier = _claims_that_meet(monkeypatch)

    assert not barrier.broken, "the two claims did not walk their pools at the same time"
    pools = [{m.pool for m in moved} for moved in claimed]
    assert sorted(map(sorted, pools)) == [["a"], ["b"]]  # one pool each: the other was taken
    ids = [m.id for moved in claimed for m in moved]
    assert len(ids) == len(set(ids)) == 20  # 10 a pool (its limit), none twice
    assert Execution.objects.filter(state="QUEUED").count() == 20


def test_a_capped_tenant_admitted_in_two_pools_at_once_stays_within_its_limit(
    two_pools, tenant, other_tenant, make_job, monkeypatch
):
    """The claims meet while each walks its pool; the first to admit the capped tenant's work holds
    the lock across pools, and the other, once it has it, reads the tenant's load again: 3 in all."""
    tenant.max_concurrent_executions = 3
    tenant.save()
    now = timezone.now()
    for pool in ("a", "b"):
        for owner in (tenant, other_tenant):
            for _ in range(5):
                make_job(owner, pool=pool, run_at=now - timedelta(seconds=1))
    capacity(now, slots=10, pools=["a", "b"])

    claimed, _, barrier = _claims_that_meet(monkeypatch)

    assert not barrier.broken
    queued = Execution.objects.filter(state="QUEUED")
    assert queued.filter(tenant_id=tenant.pk).count() == 3
    assert queued.filter(tenant_id=other_tenant.pk).count() == 10
    assert len([m for moved in claimed for m in moved]) == 13


def test_a_claim_whose_snapshot_predates_another_claim_of_its_pool_reads_the_pools_counts_again(
    two_pools, tenant, make_job, monkeypatch
):
    """The second claim reads its snapshot, then waits at the pool's lock while the first claims the
    pool and commits: it finds the pool's stamp moved on by more than itself, counts again, and
    admits nothing past the pool's limit (10): 10 in all, not 20."""
    now = timezone.now()
    for _ in range(30):
        make_job(tenant, pool="a", run_at=now - timedelta(seconds=1))
    capacity(now, slots=5, pools=["a"])
    first_done, second_waits = threading.Event(), threading.Event()
    claim_pool = type(store()).claim_pool

    def after_the_first(self, pool, **kwargs):
        if threading.current_thread().name == "second":
            second_waits.set()
            assert first_done.wait(10)
        return claim_pool(self, pool, **kwargs)

    monkeypatch.setattr(type(store()), "claim_pool", after_the_first)
    claimed, errors = [], []

    def one_claim() -> None:
        try:
            with transaction.atomic():
                claimed.append(
                    claim(
                        now=timezone.now(),
                        limit=1000,
                        publish_grace=timedelta(seconds=30),
                        limit_of=lambda pool, load: 10,
                    ).executions
                )
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    second = threading.Thread(target=one_claim, name="second")
    second.start()
    assert second_waits.wait(10)
    first = threading.Thread(target=one_claim, name="first")
    first.start()
    first.join(30)
    first_done.set()
    second.join(30)

    assert not errors, errors
    assert sorted(len(moved) for moved in claimed) == [0, 10]
    assert Execution.objects.filter(state="QUEUED").count() == 10
