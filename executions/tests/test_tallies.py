"""The metrics' counters (executions/tallies.py, readmodels/metrics.py): what the store holds plus
what was folded, so that pruning, deleting, re-driving and moving executions never lowers one."""

from datetime import timedelta

import pytest
from django.contrib.admin.sites import AdminSite
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from executions import transitions
from executions.models import Execution, ExecutionTotal
from executions.states import ExecutionState as S
from executions.tallies import LAG_BUCKETS, Histogram, Tally, difference
from jobs.models import Job
from readmodels.metrics import OTHER_TENANTS, metrics_snapshot, top_tenants
from scheduling.execution_changes import execution_redrive
from scheduling.job_changes import job_update
from tenants.models import Tenant
from tenants.services import tenant_create
from web.admin import ExecutionAdmin, JobAdmin, TenantAdmin

LEASE = timedelta(seconds=30)

# --- pure logic ------------------------------------------------------------------------------------


@given(st.lists(st.floats(min_value=0, max_value=2000, allow_nan=False), max_size=30))
def test_a_histogram_survives_its_json_and_adds_up(observations):
    """A folded histogram reads back as it was stored, and adding then taking away is nothing."""
    h = Histogram(
        LAG_BUCKETS,
        [sum(1 for o in observations if o <= b) for b in LAG_BUCKETS],
        len(observations),
        sum(observations),
    )
    back = Histogram.from_json(LAG_BUCKETS, h.to_json(), h.count, h.total)
    assert back == h
    assert h.plus(h).plus(h, -1) == h
    assert all(a <= b for a, b in zip(back.buckets, back.buckets[1:], strict=False))


def test_a_bound_the_totals_were_not_kept_by_reads_the_nearest_lower_one():
    """Bounds added after a fold never claim more than is true, and stay cumulative."""
    h = Histogram.from_json((0.5, 1.0, 2.0, 4.0), {"1": 3, "4": 7}, 9, 12.0)
    assert h.buckets == [0, 3, 3, 7]
    assert (h.count, h.total) == (9, 12.0)


def test_difference_is_what_a_change_took_away_key_by_key():
    """A re-drive: DEAD with 1 retry before, PENDING with 2 attempts beyond the first after. The
    end is kept, and the re-drive's attempt is taken off the retries."""
    before = {("p", 1, "DEAD"): Tally(finished=1, retries=1)}
    after = {("p", 1, "PENDING"): Tally(retries=2)}
    delta = difference(before, after)
    assert delta[("p", 1, "DEAD")].finished == 1 and delta[("p", 1, "DEAD")].retries == 1
    assert delta[("p", 1, "PENDING")].retries == -2
    assert difference(before, before) == {}


def test_top_tenants_are_the_busiest_then_the_oldest_and_at_most_the_cap():
    assert top_tenants({5: 10, 3: 10, 9: 50, 1: 2}, limit=3) == [9, 3, 5]
    assert top_tenants({5: 10}, limit=0) == []


# --- against the store -----------------------------------------------------------------------------


def _run(execution, outcome: str, *, t0, lag: float = 0.3, duration: float = 2.0, failures: int = 0):
    """Through the named transitions, with its times given: `failures` failed attempts (each
    retried at once), then `outcome` (SUCCEEDED, DEAD or CANCELLED while running)."""
    pk = execution.pk
    at = t0
    for _ in range(failures):
        at = _start(pk, at, lag)
        token = Execution.objects.get(pk=pk).lease_token
        assert transitions.fail(execution_id=pk, lease_token=token, now=at, error="boom", traceback="")
        assert transitions.retry(execution_id=pk, source=S.FAILED, now=at, available_at=at, message="retry")
    at = _start(pk, at, lag)
    token = Execution.objects.get(pk=pk).lease_token
    end = at + timedelta(seconds=duration)
    if outcome == S.SUCCEEDED:
        assert transitions.succeed(execution_id=pk, lease_token=token, now=end, result=None)
    elif outcome == S.DEAD:
        assert transitions.fail(execution_id=pk, lease_token=token, now=end, error="boom", traceback="")
        assert transitions.discard(execution_id=pk, source=S.FAILED, now=end, message="exhausted")
    else:
        assert transitions.cancel_running(execution_id=pk, lease_token=token, now=end, reason="stop")
    return Execution.objects.get(pk=pk)


def _start(pk, at, lag):
    assert transitions.queue_many([pk], now=at, publish_grace=LEASE)
    token = Execution.objects.get(pk=pk).lease_token
    started = at + timedelta(seconds=lag)
    assert transitions.start(execution_id=pk, lease_token=token, now=started, worker_id="w:1", lease=LEASE)
    return started


def _counters(snapshot):
    """The counters of a snapshot; histogram sums to the µs (a sum of folded sums is a float's)."""

    def rounded(histograms):
        return {pool: (h.buckets, h.count, round(h.total, 6)) for pool, h in histograms.items()}

    return (snapshot.finished, snapshot.retries, rounded(snapshot.lag), rounded(snapshot.duration))


@pytest.fixture
def workload(tenant, other_tenant, make_job):
    """acme: 2 SUCCEEDED (one after 2 retries), 1 DEAD; globex: 1 CANCELLED while running, 1
    cancelled before it ran, 1 PENDING with a retry behind it; all in pool default."""
    t0 = timezone.now() - timedelta(days=40)
    make = lambda t: make_job(t, run_at=t0, now=t0).executions.get()  # noqa: E731
    _run(make(tenant), S.SUCCEEDED, t0=t0)
    _run(make(tenant), S.SUCCEEDED, t0=t0, failures=2, lag=0.02, duration=0.2)
    _run(make(tenant), S.DEAD, t0=t0, duration=40)
    _run(make(other_tenant), S.CANCELLED, t0=t0)
    assert transitions.cancel(execution_id=make(other_tenant).pk, now=t0, reason="no")
    waiting = make(other_tenant)
    _start(waiting.pk, t0, 0.1)
    token = Execution.objects.get(pk=waiting.pk).lease_token
    assert transitions.fail(execution_id=waiting.pk, lease_token=token, now=t0, error="x", traceback="")
    assert transitions.retry(execution_id=waiting.pk, source=S.FAILED, now=t0, available_at=t0, message="r")
    return t0


def _snapshot(max_tenants: int = 50):
    return metrics_snapshot(now=timezone.now(), max_tenants=max_tenants)


def test_the_counters_count_ends_retries_and_the_last_attempts_times(workload):
    s = _snapshot()
    assert s.finished == {
        ("default", "acme", "SUCCEEDED"): 2,
        ("default", "acme", "DEAD"): 1,
        ("default", "globex", "CANCELLED"): 2,
    }
    assert s.retries == {"default": 3}
    assert s.dead_letter == {"default": 1}
    lag, duration = s.lag["default"], s.duration["default"]
    # Observed: the four finished executions that started (the one cancelled before it ran did not).
    assert lag.count == duration.count == 4
    assert lag.buckets[LAG_BUCKETS.index(0.025)] == 1  # the retried one's last attempt: 0.02 s
    assert lag.buckets[LAG_BUCKETS.index(0.5)] == 4
    assert lag.total == pytest.approx(0.3 * 3 + 0.02)
    assert duration.total == pytest.approx(2 + 0.2 + 40 + 2)


def test_pruning_folds_so_no_counter_goes_down(workload, settings):
    before = _counters(_snapshot())
    pruned, _ = transitions.prune_many(before=timezone.now(), limit=100)

    assert pruned == 5
    assert Execution.objects.count() == 1
    assert _counters(_snapshot()) == before
    assert _snapshot().dead_letter == {"default": 0}  # a gauge: what is DEAD now


def test_the_sweeper_prunes_past_the_retention_and_no_counter_goes_down(workload):
    """The sweep itself (the sweeper's retention service): the 40-day-old finished executions go,
    their ends, retries and times stay counted."""
    from testing.steps import sweeper_pass

    before = _counters(_snapshot())
    result = sweeper_pass(timezone.now())
    assert result["retention"].pruned == 5
    assert _counters(_snapshot()) == before


def test_a_redrive_keeps_the_end_it_had_and_its_attempt_is_not_a_retry(workload):
    dead = Execution.objects.get(state=S.DEAD)
    before = _snapshot()
    execution_redrive(execution=dead, now=timezone.now())
    after = _snapshot()
    assert _counters(after) == _counters(before)
    assert after.dead_letter == {"default": 0}

    _run(dead, S.DEAD, t0=timezone.now())
    again = _snapshot()
    assert again.finished[("default", "acme", "DEAD")] == 2
    assert again.retries == before.retries
    assert again.lag["default"].count == before.lag["default"].count + 1


def test_a_pending_retry_moved_to_another_pool_leaves_each_pools_retries_as_they_were(workload, settings):
    settings.TICKWORK_POOLS = ["default", "batch"]
    job = Execution.objects.get(state=S.PENDING).job
    before = _snapshot()
    job_update(job=job, fields={"pool": "batch"}, now=timezone.now(), actor="test")
    assert Execution.objects.get(job=job).pool == "batch"
    after = _snapshot()
    assert after.retries == {"default": before.retries["default"], "batch": 0}


@pytest.mark.parametrize("admin_class", [ExecutionAdmin, JobAdmin, TenantAdmin])
def test_deleting_in_the_admin_folds_first(workload, admin_class, rf, admin_user):
    """Deleting executions, their jobs or their tenant in the admin lowers no counter."""
    model = {ExecutionAdmin: Execution, JobAdmin: Job, TenantAdmin: Tenant}[admin_class]
    model_admin = admin_class(model, AdminSite())
    request = rf.post("/admin/")
    request.user = admin_user
    before = _counters(_snapshot())

    model_admin.delete_queryset(request, model.objects.all())
    assert not Execution.objects.exists()
    assert ExecutionTotal.objects.exists()
    after = _snapshot()
    if admin_class is TenantAdmin:  # a deleted tenant's ends count under _other
        assert sum(after.finished.values()) == sum(before[0].values())
        assert {tenant for _, tenant, _ in after.finished} == {OTHER_TENANTS}
        assert _counters(after)[1:] == before[1:]
    else:
        assert _counters(after) == before


def test_past_the_cap_tenants_are_summed_as_other(tenant, make_job):
    """Three tenants with 3, 2 and 1 ends; a cap of 2 labels the two busiest."""
    t0 = timezone.now() - timedelta(hours=1)
    tenants = [tenant, tenant_create(slug="beta"), tenant_create(slug="gamma")]
    for n, t in zip([3, 2, 1], tenants, strict=True):
        for _ in range(n):
            _run(make_job(t, run_at=t0, now=t0).executions.get(), S.SUCCEEDED, t0=t0)
    assert _snapshot(max_tenants=2).finished == {
        ("default", "acme", "SUCCEEDED"): 3,
        ("default", "beta", "SUCCEEDED"): 2,
        ("default", OTHER_TENANTS, "SUCCEEDED"): 1,
    }
    assert _snapshot(max_tenants=0).finished == {("default", OTHER_TENANTS, "SUCCEEDED"): 6}
