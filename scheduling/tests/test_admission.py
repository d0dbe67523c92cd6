"""Admission in-process (scheduling/admission.py through dispatcher.run_once), on both stores:
capacity from the registry, strict priority, the fair order between tenants and the tenants'
concurrency limits. The same with real processes: tests_e2e/test_e2e_fairness.py."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from jobs import transitions as job_transitions
from jobs.models import Priority
from pools.models import Worker
from tenants.services import tenant_create
from testing.steps import dispatch, start, succeed

pytestmark = pytest.mark.usefixtures("exact_admission")


def _due(make_job, tenant, count, now, **fields):
    return [make_job(tenant, run_at=now + timedelta(milliseconds=i), **fields) for i in range(count)]


def _admitted_tenants(sent) -> list[str]:
    ids = [d.execution_id for d in sent]
    slugs = dict(Execution.objects.filter(pk__in=ids).values_list("id", "tenant__slug"))
    return [slugs[Execution._meta.pk.to_python(i)] for i in ids]


def _finish(sent, now):
    for d in sent:
        start(d.execution_id, now=now)
        succeed(d.execution_id, now=now)


def test_a_pool_without_a_live_worker_admits_nothing(db, tenant, make_job):
    now = timezone.now()
    _due(make_job, tenant, 3, now)
    result, sent = dispatch(now + timedelta(seconds=1), slots=None)
    # Nor is it looked at again soon: it waits for a worker, not for a slot.
    assert sent == [] and result.held_back == set()
    # A worker that stopped reporting long ago counts for nothing either.
    Worker.objects.create(
        hostname="gone", pid=1, pools=["default"], slots=8, started_at=now - timedelta(hours=1),
        last_seen_at=now - timedelta(minutes=5),
    )  # fmt: skip
    assert dispatch(now + timedelta(seconds=1), slots=None)[1] == []


def test_a_pool_admits_up_to_its_slots_and_the_next_as_slots_free(db, tenant, make_job):
    now = timezone.now()
    _due(make_job, tenant, 5, now)
    later = now + timedelta(seconds=1)
    first = dispatch(later, slots=2)[1]
    assert len(first) == 2
    assert dispatch(later, slots=2)[1] == []  # full: QUEUED counts as admitted
    _finish(first[:1], later)
    assert len(dispatch(later, slots=2)[1]) == 1


def test_high_priority_is_admitted_before_normal_and_low_backlogs(db, tenant, other_tenant, make_job):
    now = timezone.now()
    _due(make_job, tenant, 5, now, priority=Priority.LOW)
    _due(make_job, other_tenant, 5, now, priority=Priority.NORMAL)
    (high,) = _due(make_job, other_tenant, 1, now + timedelta(seconds=1), priority=Priority.HIGH)
    sent = dispatch(now + timedelta(seconds=2), slots=1)[1]
    assert [d.execution_id for d in sent] == [str(Execution.objects.get(job=high).pk)]


def test_a_tenant_with_one_job_is_not_behind_another_tenants_backlog(db, tenant, other_tenant, make_job):
    now = timezone.now()
    _due(make_job, tenant, 30, now)
    later = now + timedelta(seconds=5)
    _finish(dispatch(later, slots=2)[1], later)  # acme has been running for a while
    _due(make_job, other_tenant, 1, later)
    sent = dispatch(later + timedelta(seconds=1), slots=2)[1]
    assert "globex" in _admitted_tenants(sent)


def test_a_tenant_whose_earliest_due_job_is_paused_still_gets_its_turn(db, tenant, other_tenant, make_job):
    """A contended claim finds each tenant's head at the start of its due work; when that first
    execution's job is paused, the head is the first of an active job behind it."""
    now = timezone.now()
    _due(make_job, tenant, 30, now)
    (paused,) = _due(make_job, other_tenant, 1, now - timedelta(seconds=10))
    assert job_transitions.pause(job_id=paused.pk, now=now)
    (waiting,) = _due(make_job, other_tenant, 1, now + timedelta(seconds=1))
    sent = dispatch(now + timedelta(seconds=2), slots=2)[1]
    ids = [d.execution_id for d in sent]
    assert str(Execution.objects.get(job=waiting).pk) in ids
    assert str(Execution.objects.get(job=paused).pk) not in ids


def test_starts_a_tenant_with_too_little_due_leaves_go_to_the_others(db, tenant, other_tenant, make_job):
    """Offered two of four starts, acme has one due: its unused start goes to globex in the
    claim's next round, as globex's third execution (not its first again)."""
    now = timezone.now()
    _due(make_job, tenant, 1, now)
    _due(make_job, other_tenant, 10, now)
    sent = dispatch(now + timedelta(seconds=1), slots=4)[1]
    assert len({d.execution_id for d in sent}) == len(sent) == 4
    assert Counter(_admitted_tenants(sent)) == {"acme": 1, "globex": 3}


def test_starts_follow_the_tenants_weights(db, make_job):
    heavy, light = tenant_create(slug="heavy"), tenant_create(slug="light")
    heavy.weight = 3
    heavy.save()
    now = timezone.now()
    _due(make_job, heavy, 40, now)
    _due(make_job, light, 40, now)
    later = now + timedelta(seconds=1)
    starts: list[str] = []
    for _ in range(10):  # four slots, all freed between claims: 40 starts
        sent = dispatch(later, slots=4)[1]
        starts += _admitted_tenants(sent)
        _finish(sent, later)
    assert Counter(starts) == {"heavy": 30, "light": 10}


def test_the_midnight_herd_gives_every_tenant_a_first_start_before_anyone_a_second(db, make_job):
    tenants = [tenant_create(slug=f"t{i}") for i in range(6)]
    now = timezone.now()
    for t in tenants:
        _due(make_job, t, 4, now)
    later = now + timedelta(seconds=1)
    starts: list[str] = []
    for _ in range(6):
        sent = dispatch(later, slots=2)[1]
        starts += _admitted_tenants(sent)
        _finish(sent, later)
    assert sorted(starts[:6]) == sorted(t.slug for t in tenants)
    assert sorted(starts[6:12]) == sorted(t.slug for t in tenants)


def test_a_tenants_concurrency_limit_holds_across_pools_and_claims(db, settings, tenant, other_tenant, make_job):
    settings.TICKWORK_POOLS = ["default", "batch"]
    tenant.max_concurrent_executions = 2
    tenant.save()
    now = timezone.now()
    _due(make_job, tenant, 3, now)
    _due(make_job, tenant, 3, now, pool="batch")
    _due(make_job, other_tenant, 3, now)
    later = now + timedelta(seconds=1)
    sent = dispatch(later, slots=10)[1]
    assert Counter(_admitted_tenants(sent)) == {"acme": 2, "globex": 3}
    assert dispatch(later, slots=10)[1] == []  # acme runs 2 of its 2
    _finish(sent, later)
    assert Counter(_admitted_tenants(dispatch(later, slots=10)[1])) == {"acme": 2}


def test_a_change_of_weight_or_limit_applies_to_the_next_claim(db, tenant, make_job):
    now = timezone.now()
    _due(make_job, tenant, 4, now)
    tenant.max_concurrent_executions = 1
    tenant.save()
    later = now + timedelta(seconds=1)
    assert len(dispatch(later, slots=10)[1]) == 1
    tenant.max_concurrent_executions = None
    tenant.save()
    assert len(dispatch(later, slots=10)[1]) == 3
