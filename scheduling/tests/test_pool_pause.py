"""A paused pool admits nothing: the real dispatcher's claim (dispatcher.run_once) leaves its due
work PENDING, with the pending reason POOL_PAUSED, while other pools are admitted as before;
resume admits it at the next claim. Run on PostgreSQL and on the embedded default (SQLite)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from executions.models import Execution
from readmodels.pending_reasons import pending_reasons
from scheduling.pool_pauses import UnknownPool, paused_pools, pool_pause, pool_resume
from testing.steps import capacity, claim, dispatch

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _two_pools(settings):
    settings.TICKWORK_POOLS = ["default", "billing"]


def _due(make_job, tenant, now, pool: str) -> Execution:
    return make_job(tenant, run_at=now - timedelta(seconds=5), pool=pool).executions.get()


def test_a_paused_pools_due_work_is_not_admitted_until_it_is_resumed(tenant, make_job, now):
    """Paused: the claim publishes the other pool's work only, and the paused pool's execution
    waits PENDING saying why. What was admitted before the pause is left alone. Resumed: the
    next claim admits it."""
    admitted_before = _due(make_job, tenant, now, "billing")
    assert [d.execution_id for d in claim(now)] == [str(admitted_before.pk)]
    billing = _due(make_job, tenant, now, "billing")
    default = _due(make_job, tenant, now, "default")

    change = pool_pause(pool="billing", by="user ops", reason="upstream outage", now=now)

    assert change.changed and set(paused_pools()) == {"billing"}
    assert [d.execution_id for d in claim(now)] == [str(default.pk)]
    assert Execution.objects.get(pk=billing.pk).state == "PENDING"
    assert Execution.objects.get(pk=admitted_before.pk).state == "QUEUED"  # what is admitted finishes
    reason = pending_reasons([Execution.objects.get(pk=billing.pk)], now=now)[billing.pk]
    assert reason.code == "POOL_PAUSED" and "pool billing is paused" in reason.detail
    assert claim(now + timedelta(seconds=1)) == []  # still paused: nothing, however often it looks

    assert pool_resume(pool="billing", now=now).changed
    assert [d.execution_id for d in claim(now + timedelta(seconds=2))] == [str(billing.pk)]
    assert Execution.objects.get(pk=billing.pk).state == "QUEUED"


def test_a_paused_pool_is_not_held_back_so_the_dispatcher_does_not_look_again_soon(tenant, make_job, now):
    """Held back means "look again as slots free"; a paused pool frees nothing: its resume wakes
    the dispatchers instead."""
    _due(make_job, tenant, now, "billing")
    pool_pause(pool="billing", by="user ops", now=now)

    result, sent = dispatch(now)

    assert sent == [] and result.held_back == set()


def test_the_paused_set_is_read_with_the_claims_snapshot_not_in_a_query_of_its_own(tenant, make_job, now):
    """No extra query per claim: the one statement that reads the pauses is the snapshot, which
    also reads the live workers."""
    _due(make_job, tenant, now, "billing")
    _due(make_job, tenant, now, "default")
    pool_pause(pool="billing", by="user ops", now=now)
    capacity(now)

    with CaptureQueriesContext(connection) as queries:
        claim(now, slots=None)

    reads = [q["sql"] for q in queries.captured_queries if "pools_poolpause" in q["sql"]]
    assert len(reads) == 1 and "pools_worker" in reads[0]


def test_pause_and_resume_are_idempotent_and_know_the_pools(now):
    first = pool_pause(pool="billing", by="user ops", reason="first", now=now)
    again = pool_pause(pool="billing", by="user other", reason="second", now=now + timedelta(minutes=1))

    assert first.changed and not again.changed
    assert (again.pause.paused_by, again.pause.reason, again.pause.paused_at) == ("user ops", "first", now)
    assert pool_resume(pool="billing", now=now).changed
    assert not pool_resume(pool="billing", now=now).changed
    with pytest.raises(UnknownPool, match="no pool named 'nope'"):
        pool_pause(pool="nope", by="user ops", now=now)
