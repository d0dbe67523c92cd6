"""The worker registry (pools/registry.py): capacity per pool from live workers only."""

from datetime import timedelta

import pytest
from django.utils import timezone

from pools import registry
from pools.models import Worker
from testing.steps import sweeper_pass

pytestmark = pytest.mark.django_db


def test_capacity_counts_live_workers_per_pool_and_a_shared_worker_in_each(settings):
    settings.TICKWORK_WORKER_OFFLINE_SECONDS = 10
    now = timezone.now()
    a = registry.register(hostname="a", pid=1, pools=["default"], slots=4, now=now)
    registry.register(hostname="b", pid=2, pools=["default", "etl"], slots=2, now=now)
    registry.beat(worker_id=a, busy=3, processed=10, rate=5.0, now=now)
    assert registry.capacity(now) == {
        "default": registry.Capacity(workers=2, slots=6, busy=3, rate=5.0),
        "etl": registry.Capacity(workers=1, slots=2, busy=0),
    }


def test_a_worker_that_stops_reporting_is_offline_after_the_bound_and_a_stopped_one_at_once(settings):
    settings.TICKWORK_WORKER_OFFLINE_SECONDS = 10
    now = timezone.now()
    quiet = registry.register(hostname="a", pid=1, pools=["default"], slots=4, now=now)
    stopped = registry.register(hostname="b", pid=2, pools=["default"], slots=2, now=now)
    assert registry.capacity(now + timedelta(seconds=10))["default"].slots == 6  # at the bound: still live
    registry.deregister(worker_id=stopped, now=now + timedelta(seconds=1))
    assert registry.capacity(now + timedelta(seconds=1))["default"].slots == 4
    assert registry.capacity(now + timedelta(seconds=10.5)) == {}
    assert registry.beat(
        worker_id=quiet, busy=0, processed=0, rate=0.0, now=now + timedelta(seconds=11)
    )  # back: live again
    assert not registry.beat(
        worker_id=stopped, busy=0, processed=0, rate=0.0, now=now + timedelta(seconds=11)
    )  # must register anew
    assert registry.capacity(now + timedelta(seconds=11))["default"] == registry.Capacity(1, 4, 0)


def test_the_sweeper_forgets_workers_not_seen_for_a_day(settings):
    now = timezone.now()
    registry.register(hostname="old", pid=1, pools=["default"], slots=1, now=now - timedelta(days=2))
    registry.register(hostname="new", pid=2, pools=["default"], slots=1, now=now - timedelta(hours=1))

    assert sweeper_pass(now)["retention"].workers_forgotten == 1
    assert list(Worker.objects.values_list("hostname", flat=True)) == ["new"]
