"""What the execution table's indexes cost the writes that are most frequent: a heartbeat, one per
running execution every few seconds, writes no index entry (a HOT update), because no index holds
a column it changes (executions/models.py, Execution.Meta.indexes)."""

from datetime import timedelta

import pytest
from django.db import connection

from executions.models import Execution
from store import store

pytestmark = pytest.mark.django_db

LEASE = timedelta(seconds=30)


def _hot_updates() -> tuple[int, int]:
    """This transaction's updates of executions_execution so far, and of them HOT."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'executions_execution'"
        )
        return cursor.fetchone()


def test_a_heartbeat_is_a_hot_update(tenant, make_job, now):
    if connection.vendor != "postgresql":
        pytest.skip("HOT updates are PostgreSQL's")
    execution = make_job(tenant, run_at=now - timedelta(minutes=1), now=now - timedelta(minutes=2)).executions.get()
    (moved,), _ = store().queue([execution.pk], now=now, republish_at=now + LEASE)
    started = {"started_at": now, "heartbeat_at": now, "worker_id": "h:1", "republish_at": None}
    assert store().start(execution_id=execution.pk, lease_token=moved.lease_token, now=now, lease=LEASE, values=started)
    before = _hot_updates()

    for beat in range(1, 4):
        later = now + timedelta(seconds=5 * beat)
        assert store().heartbeat(execution_id=execution.pk, lease_token=moved.lease_token, now=later, lease=LEASE)

    updates, hot = (after - first for after, first in zip(_hot_updates(), before, strict=True))
    assert (updates, hot) == (3, 3)
    assert Execution.objects.get(pk=execution.pk).lease_expires_at == now + timedelta(seconds=15) + LEASE


@pytest.mark.both_stores
def test_one_scheduled_fire_per_instant_and_any_number_of_others(tenant, make_job, now):
    """execution_job_fire is unique among a job's SCHEDULE rows only: a second scheduled fire of
    one instant (and step) is refused, while triggers, events and backfills of that instant are
    rows of their own however many, as with the partial index it replaced."""
    from django.db import IntegrityError, transaction

    from executions.models import Origin

    job = make_job(tenant, type="CRON", schedule="0 * * * *", now=now)
    fire = job.executions.get()
    same = {
        "job": job,
        "tenant": tenant,
        "pool": fire.pool,
        "scheduled_for": fire.scheduled_for,
        "available_at": fire.scheduled_for,
    }
    for origin in (Origin.TRIGGER, Origin.TRIGGER, Origin.EVENT, Origin.BACKFILL, Origin.BACKFILL):
        Execution.objects.create(origin=origin, **same)
    Execution.objects.create(origin=Origin.SCHEDULE, step="a step", **same)
    with pytest.raises(IntegrityError), transaction.atomic():
        Execution.objects.create(origin=Origin.SCHEDULE, **same)

    assert job.executions.count() == 7


@pytest.mark.both_stores
def test_the_state_ordered_indexes_leave_the_rows_in_flight_out_on_postgresql_only():
    """On PostgreSQL execution_tenant_state, execution_state and execution_activity hold no QUEUED
    or RUNNING row (their versions write no entry there: executions.models.PartialOnPostgres); on
    SQLite, whose planner would not use them so, they are whole."""
    names = ("execution_tenant_state", "execution_state", "execution_activity")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(%s)", [list(names)])
        else:
            cursor.execute(
                f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name IN ({', '.join(['%s'] * 3)})",
                list(names),
            )
        found = dict(cursor.fetchall())
    assert set(found) == set(names)
    for definition in found.values():
        if connection.vendor == "postgresql":
            assert "WHERE (NOT" in definition and "'QUEUED'" in definition and "'RUNNING'" in definition
        else:
            assert "WHERE" not in definition.upper()
