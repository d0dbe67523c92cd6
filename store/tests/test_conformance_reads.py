"""The store's conformance suite, its reads: the dispatcher's, the claim's, the API's and the
dashboard's, and the wake-ups (the moves and writes are in test_conformance.py)."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from executions.models import Execution, ExecutionEvent
from executions.states import ExecutionState as S
from jobs.models import Job
from pools.models import PoolClock, PoolPause, PoolSample, TenantShare
from store import OverBudget, store
from store.interface import CancelListener, DueListener
from store.tests.test_conformance import _execution, _queued, _running
from tenants.models import ApiToken
from tenants.services import token_create

pytestmark = [pytest.mark.store, pytest.mark.django_db]


# --- reads ------------------------------------------------------------------------------------------------


def test_next_due_at_is_the_earliest_due_after_a_time(tenant, make_job, now):
    soon = make_job(tenant, run_at=now + timedelta(minutes=5), now=now).executions.get()
    make_job(tenant, run_at=now + timedelta(minutes=9), now=now)

    assert store().next_due_at(after=now) == soon.available_at
    assert store().next_due_at(after=now + timedelta(minutes=10)) is None


def test_pool_buckets_sum_the_minutes_of_a_bucket(tenant, other_tenant):
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    for minute in range(3):
        for who in (None, tenant, other_tenant):
            PoolSample.objects.create(
                at=start + timedelta(minutes=minute), pool="default", tenant=who, due=2, started=1
            )

    totals = store().pool_buckets(since=start, end=start + timedelta(minutes=3), bucket_seconds=120, tenant_ids=None)
    both = store().pool_buckets(
        since=start, end=start + timedelta(minutes=3), bucket_seconds=180, tenant_ids=[tenant.pk, other_tenant.pk]
    )

    assert sorted((b, pool, due, started) for b, pool, due, _, _, _, _, started, *_ in totals) == [
        (0, "default", 2, 2),
        (1, "default", 2, 1),
    ]
    assert [(b, due, started) for b, _, due, _, _, _, _, started, *_ in both] == [(0, 4, 6)]
    assert store().pool_buckets(since=start, end=start, bucket_seconds=60, tenant_ids=[]) == []


def test_api_token_finds_a_live_token_with_its_tenant(tenant):
    token, raw = token_create(tenant=tenant, name="ci")

    found = store().api_token(key_hash=ApiToken.hash_key(raw))
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())

    assert found is not None and (found.pk, found.tenant.slug) == (token.pk, tenant.slug)
    assert store().api_token(key_hash=ApiToken.hash_key(raw)) is None


# --- the dashboard's reads -------------------------------------------------------------------------------


def test_walk_counts_counts_each_capped_walk_in_one_statement(tenant, make_job, now):
    for _ in range(3):
        _execution(make_job, tenant, now)
    pending = Execution.objects.filter(state=S.PENDING).order_by().values("pk")

    dead = Execution.objects.filter(state=S.DEAD).values("pk")

    assert store().walk_counts([pending[:2], pending[:10], dead[:5]]) == [2, 3, 0]


def test_live_cursors_are_the_newest_event_and_audit_row(tenant, make_job, now):
    from executions import transitions

    execution = _execution(make_job, tenant, now)
    # Off the happy path, so that its history is rows (store/history.py).
    assert transitions.cancel(execution_id=execution.pk, now=now, reason="test")

    event_id, audit_id = store().live_cursors()

    assert event_id == ExecutionEvent.objects.filter(execution=execution).latest("id").id
    assert audit_id >= 0


def test_first_of_parts_is_the_first_rows_of_the_whole_in_order(tenant, make_job, now):
    made = [_execution(make_job, tenant, now - timedelta(minutes=minutes)) for minutes in (5, 1, 4, 2, 3)]
    Execution.objects.filter(pk__in=[made[1].pk, made[2].pk]).update(state="CANCELLED", finished_at=now)
    order = ["-scheduled_for", "-pk"]

    first = store().first_of_parts(
        Execution.objects.all(), parts=[Q(state="PENDING"), Q(state="CANCELLED")], order=order, limit=4
    )

    assert [e.pk for e in first] == [made[i].pk for i in (1, 3, 4, 2)]
    only = store().first_of_parts(Execution.objects.all(), parts=[Q(state="CANCELLED")], order=order, limit=5)
    assert [e.pk for e in only] == [made[1].pk, made[2].pk]


def test_estimate_rows_is_a_guess_or_none(tenant, make_job, now):
    _execution(make_job, tenant, now)

    guess = store().estimate_rows(Execution.objects.all())

    assert guess is None or guess >= 0


def test_start_lags_per_minute_and_over_all(tenant, make_job, now):
    from readmodels.start_lag import could_run_from

    runs = [_running(make_job, tenant, now) for _ in range(2)]
    # Due a minute before they started, made before that.
    Execution.objects.filter(pk__in=[r.pk for r in runs]).update(created_at=now - timedelta(minutes=2))

    per_minute, (count, p50, p99) = store().start_lags(
        Execution.objects.filter(pk__in=[r.pk for r in runs]), could_run_from=could_run_from()
    )

    assert count == 2 and p50 == pytest.approx(60, abs=1) and p99 == pytest.approx(60, abs=1)
    assert list(per_minute) == [now.replace(second=0, microsecond=0)]


def test_statement_budget_stops_a_long_read_where_the_store_bounds_statements():
    with store().statement_budget(10_000):
        assert Execution.objects.count() == 0
    if store().bounds_statements:
        with pytest.raises(OverBudget), store().statement_budget(1), transaction.get_connection().cursor() as cursor:
            cursor.execute("SELECT pg_sleep(0.2)")


def test_newest_first_merges_ordered_walks(tenant, other_tenant, make_job, now):
    mine = [_execution(make_job, tenant, now) for _ in range(2)]
    theirs = [_execution(make_job, other_tenant, now) for _ in range(2)]
    order = ("-scheduled_for", "-id")
    walks = [
        Execution.objects.filter(tenant=t).order_by(*order).values_list("scheduled_for", "id")
        for t in (tenant, other_tenant)
    ]
    everything = Execution.objects.filter(tenant__in=[tenant, other_tenant]).values_list("scheduled_for", "id")

    rows = store().newest_first(walks, everything, 0, 3, order=order)

    expected = sorted(((e.scheduled_for, e.pk) for e in mine + theirs), reverse=True)[:3]
    assert [tuple(row) for row in rows] == expected


# --- wake-ups and the clock ---------------------------------------------------------------------------------


def test_notify_due_and_its_listener(now):
    listener = store().due_listener()
    try:
        store().notify_due(now)  # delivered where the database notifies (autocommit here)
        heard = listener.wait(0.5 if store().due_notifications else 0.01, lambda seconds: None)
    finally:
        listener.close()

    assert isinstance(listener, DueListener)
    assert (heard is not None) == (store().due_notifications and not transaction.get_connection().in_atomic_block)


def test_notify_cancel_and_the_cancel_listener(tenant, make_job, now):
    listener = store().cancel_listener(host="h")
    try:
        execution = _running(make_job, tenant, now)
        store().request_cancel(execution_id=execution.pk, now=now, message="asked")
        store().notify_cancel("h:1")
        heard = listener.wait(0.5, lambda seconds: None)
    finally:
        listener.close()

    assert isinstance(listener, CancelListener)
    assert heard in ([], ["h:1"])  # NOTIFY waits for a commit that a test's transaction never makes


def test_measure_clock_is_the_database_time_where_it_is_another_hosts():
    if store().remote_clock:
        assert abs(store().measure_clock() - timezone.now()) < timedelta(minutes=1)
    else:
        with pytest.raises(NotImplementedError):
            store().measure_clock()


# --- the claim -----------------------------------------------------------------------------------------------


def test_the_claims_reads_find_the_due_work_of_active_jobs(tenant, other_tenant, make_job, now):
    mine = _execution(make_job, tenant, now)
    theirs = _execution(make_job, other_tenant, now, priority=0)
    paused = _execution(make_job, tenant, now)
    Job.objects.filter(pk=paused.job_id).update(state="PAUSED")

    with transaction.atomic():
        assert store().claim_pool("default", seen=0, counts=(0, 0)) == (0, 0)
        assert store().anything_due(now=now)
        due = store().due_in_pool(pool="default", now=now, limit=10)
        heads = dict(store().due_heads(pool="default", priority=1, tenant_ids=[tenant.pk, other_tenant.pk], now=now))
        of_tenants = store().due_of_tenants(pool="default", priority=1, quotas={tenant.pk: 5}, now=now)

    assert [row[0] for row in due] == [theirs.pk, mine.pk]  # HIGH first
    assert due[0] == (theirs.pk, False, other_tenant.pk, 0)
    assert heads == {tenant.pk: mine.available_at}
    assert [row[0] for row in of_tenants] == [mine.pk]
    assert not store().anything_due(now=now - timedelta(hours=1))


def test_a_claim_reads_what_a_pool_and_the_capped_tenants_have_admitted(tenant, other_tenant, make_job, now):
    """`pools_with_due` finds the pools with due work; `claim_pool` answers the pool's (QUEUED,
    RUNNING) once the claim has its turn there (alone, it always does); `hold_tenants` each tenant's
    QUEUED + RUNNING in every pool."""
    _queued(make_job, tenant, now)
    _running(make_job, tenant, now)
    _running(make_job, tenant, now, pool="reports")
    _execution(make_job, other_tenant, now)  # PENDING: not admitted

    assert store().pools_with_due(["default", "reports", "nothing-here"], now=now) == {"default"}
    assert store().pools_with_due(["default"], now=now - timedelta(hours=1)) == set()
    snapshot = store().snapshot(live_since=now, admitted=False)
    assert sorted(snapshot.admitted) == [
        ("default", 0, "QUEUED", 1),
        ("default", 0, "RUNNING", 1),
        ("reports", 0, "RUNNING", 1),
    ]
    with transaction.atomic():
        # The stamp as seen: the snapshot's counts hold. Another claim's in between: read again.
        assert store().claim_pool("default", seen=snapshot.stamps.get("default", 0), counts=(1, 1)) == (1, 1)
        assert store().claim_pool("reports", seen=snapshot.stamps.get("reports", 0), counts=(0, 1)) == (0, 1)
    # Claimed since the snapshot (above): PostgreSQL reads the pool's counts again; SQLite's claim
    # held the one writer's lock throughout, so what its snapshot read holds.
    again = (1, 1) if connection.vendor == "postgresql" else (9, 9)
    with transaction.atomic():
        assert store().claim_pool("default", seen=snapshot.stamps.get("default", 0), counts=(9, 9)) == again
        assert store().hold_tenants([tenant.pk, other_tenant.pk]) == {tenant.pk: 3}
        assert store().hold_tenants([]) == {}


def test_anything_blocked_says_whether_any_execution_waits_blocked(tenant, make_job, now):
    waiting = _execution(make_job, tenant, now)
    assert not store().anything_blocked()

    Execution.objects.filter(pk=waiting.pk).update(state="BLOCKED")

    assert store().anything_blocked()


def test_snapshot_shares_and_save_shares(tenant, make_job, now):
    _queued(make_job, tenant, now)
    _execution(make_job, tenant, now)
    PoolPause.objects.create(pool="batch", paused_at=now)

    snapshot = store().snapshot(live_since=now - timedelta(minutes=1))
    store().save_shares(pool="default", finish_tags={tenant.pk: 2.5}, virtual_time=1.5)
    clock, shares = store().shares(pool="default")

    assert ("default", tenant.pk, "QUEUED", 1) in snapshot.admitted
    assert snapshot.paused == frozenset({"batch"})
    assert clock == 1.5
    assert (tenant.pk, tenant.weight, tenant.max_concurrent_executions, 2.5) in shares
    assert TenantShare.objects.get(tenant=tenant, pool="default").finish_tag == 2.5
    assert PoolClock.objects.get(pool="default").virtual_time == 1.5
