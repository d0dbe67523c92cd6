"""The pools' minute samples (maintenance/services/pool_history.py): what the sweeper records as a minute
ends, once, per (pool, tenant); how the charts' buckets are made of them (readmodels/pool_history.py);
their pruning; and the start lag measured from when the work could first run (readmodels/start_lag.py)."""

from datetime import UTC, datetime, timedelta

import pytest

from executions.models import Execution
from maintenance.services import pool_history
from maintenance.services.pool_history import PoolHistory
from maintenance.services.retention import Retention
from pools.models import PoolSample
from readmodels.pool_history import history
from readmodels.start_lag import start_lag_seconds

pytestmark = pytest.mark.django_db
T = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _forget_the_last_minute(monkeypatch):
    monkeypatch.setattr(pool_history, "_recorded", {})


def _finished(drive, make_job, tenant, *, state, started, lag, created=None):
    execution = drive(make_job(tenant).executions.get(), state)
    Execution.objects.filter(pk=execution.pk).update(
        available_at=started - timedelta(seconds=lag),
        created_at=created or started - timedelta(hours=1),
        started_at=started,
        finished_at=started + timedelta(seconds=1),
    )
    return execution


def test_a_minute_is_recorded_once_per_pool_and_tenant(tenant, other_tenant, make_job, drive):
    """The minute before `now`: finished by outcome, started with their lag, and the queue at its
    end (due and not yet due, queued, running); a tenant with nothing to say has no row."""
    for lag in (0.1, 0.3):
        _finished(drive, make_job, tenant, state="SUCCEEDED", started=T + timedelta(seconds=10), lag=lag)
    _finished(drive, make_job, tenant, state="DEAD", started=T + timedelta(seconds=20), lag=0.2)
    make_job(tenant, run_at=T - timedelta(minutes=5))  # due at the minute's end
    make_job(tenant, run_at=T + timedelta(hours=1))  # not due: not backlog
    drive(make_job(other_tenant).executions.get(), "RUNNING")
    Execution.objects.filter(tenant=other_tenant, state="RUNNING").update(started_at=T - timedelta(minutes=5))

    written = pool_history.record(now=T + timedelta(seconds=70))

    assert written == 3  # a row per tenant with anything to say, and the pool's total
    total = PoolSample.objects.get(tenant=None)
    assert (total.due, total.running, total.succeeded, total.failed, total.started) == (1, 1, 2, 1, 3)
    assert total.lag_p50_ms == pytest.approx(200)
    mine = PoolSample.objects.get(tenant=tenant)
    assert mine.at == T and mine.pool == "default"
    assert (mine.due, mine.queued, mine.running) == (1, 0, 0)
    assert (mine.succeeded, mine.failed, mine.cancelled, mine.started) == (2, 1, 0, 3)
    assert mine.lag_p50_ms == pytest.approx(200) and mine.lag_p99_ms == pytest.approx(298)
    theirs = PoolSample.objects.get(tenant=other_tenant)
    assert (theirs.running, theirs.started, theirs.lag_p50_ms) == (1, 0, None)

    assert pool_history.record(now=T + timedelta(seconds=80)) == 0  # recorded: not again
    pool_history._recorded.clear()  # another sweeper, which has not recorded it itself
    assert pool_history.record(now=T + timedelta(seconds=90)) == 0
    assert PoolSample.objects.count() == 3


def test_a_quiet_minute_still_records_each_pools_zero(settings):
    """A zero, not a gap: the chart of a quiet pool is a flat line, and the minute is known done."""
    settings.TICKWORK_POOLS = ["default", "billing"]

    assert pool_history.record(now=T + timedelta(seconds=70)) == 2

    assert sorted(PoolSample.objects.values_list("pool", "tenant", "due", "started")) == [
        ("billing", None, 0, 0),
        ("default", None, 0, 0),
    ]


def test_the_charts_buckets_sum_tenants_per_minute_and_keep_the_busiest_minute(tenant, other_tenant):
    def sample(at, tenant, **counts):
        PoolSample.objects.create(at=at, pool="default", tenant=tenant, **counts)

    sample(T, tenant, due=5, queued=1, running=2, succeeded=10, started=10, lag_p50_ms=100, lag_p99_ms=900)
    sample(T, other_tenant, due=5, succeeded=1, started=30, lag_p50_ms=300, lag_p99_ms=500)
    sample(T + timedelta(minutes=1), tenant, due=7, failed=2)
    sample(T + timedelta(minutes=15), tenant, due=1)
    sample(T - timedelta(minutes=1), tenant, due=99)  # before the range
    # The totals, as record() writes them beside the tenants' rows (staff read these).
    sample(T, None, due=10, queued=1, running=2, succeeded=11, started=40, lag_p50_ms=250, lag_p99_ms=900)
    sample(T + timedelta(minutes=1), None, due=7, failed=2)
    sample(T + timedelta(minutes=15), None, due=1)
    window = {"since": T, "end": T + timedelta(minutes=30), "bucket": timedelta(minutes=15)}

    both = history(scope=None, **window)
    mine = history(scope=[tenant.pk], **window)
    summed = history(scope=[tenant.pk, other_tenant.pk], **window)

    assert [b.at for b in both] == [T, T + timedelta(minutes=15)]
    first = both[0]
    assert first.due == {"default": 10}  # 5 + 5 in one minute beats 7 in the next
    assert first.admitted == {"default": 3}
    assert (first.succeeded, first.failed, first.started) == (11, 2, 40)
    assert first.lag_p50_ms == pytest.approx(250)  # (10 * 100 + 30 * 300) / 40
    assert first.lag_p99_ms == 900
    assert both[1].due == {"default": 1} and both[1].lag_p50_ms is None
    assert mine[0].due == {"default": 7} and mine[0].succeeded == 10
    # A member of both: the tenants' rows summed per minute, then the busiest minute kept.
    assert summed[0].due == {"default": 10} and summed[0].lag_p50_ms == pytest.approx(250)
    assert history(scope=[], **window)[0].due == {}


def test_samples_older_than_eight_days_are_pruned_by_retention(tenant):
    PoolSample.objects.create(at=T - timedelta(days=8, minutes=1), pool="default", tenant=tenant)
    PoolSample.objects.create(at=T - timedelta(days=7), pool="default", tenant=tenant)

    assert PoolHistory().run_once(now=T).samples == 1  # the last minute's total
    assert Retention(retention=timedelta(days=30)).run_once(now=T).samples_pruned == 1

    assert list(PoolSample.objects.filter(tenant=tenant).values_list("at", flat=True)) == [T - timedelta(days=7)]


def test_start_lag_runs_from_the_later_of_due_and_creation():
    """A job created with a runAt an hour in the past, started a second after its creation, waited
    a second, not an hour; a retry's lag runs from its backoff."""
    created = T
    assert start_lag_seconds(
        started_at=T + timedelta(seconds=1), available_at=T - timedelta(hours=1), created_at=created
    ) == pytest.approx(1)
    assert start_lag_seconds(
        started_at=T + timedelta(minutes=5, seconds=2), available_at=T + timedelta(minutes=5), created_at=created
    ) == pytest.approx(2)
    assert start_lag_seconds(started_at=T, available_at=T + timedelta(seconds=1), created_at=created) == 0


def test_the_dashboards_hour_measures_a_past_run_at_from_the_jobs_creation(tenant, make_job, drive):
    from dashboard import selectors

    now = T + timedelta(minutes=30)
    _finished(
        drive,
        make_job,
        tenant,
        state="SUCCEEDED",
        started=T + timedelta(minutes=10, seconds=2),
        lag=3600,
        created=T + timedelta(minutes=10),
    )

    hour = selectors.last_hour(scope=None, now=now)

    assert hour.lag_p50_ms == pytest.approx(2000, abs=1)
