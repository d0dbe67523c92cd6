"""The event history partitioned by day (PostgreSQL; executions/history_partitions.py,
store/postgres/partitions.py): partitions made ahead, idempotently; an event whose day has no
partition still written, and moved into its partition when that is made; retention drops a day
whole, keeps the events of an execution it keeps, and the timelines read the same across the
days' boundaries before and after. The embedded default keeps a plain table: the same retention
and reads hold there (its partitions' operations are no-ops), so these run on both stores."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from executions import history, transitions
from executions.history_partitions import history_partitions_ahead
from executions.models import Execution, ExecutionEvent
from executions.states import ExecutionState as S
from maintenance.services.history_partitions import HistoryPartitions
from maintenance.services.retention import Retention

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

LEASE = timedelta(seconds=30)
# Far from today's partitions (the migration's): these days have none until a test makes them.
DAY1 = datetime(2031, 3, 10, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
POSTGRES = "postgresql"


def _where(execution_id) -> list[str]:
    """The partition of each of the execution's events, oldest first (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM executions_executionevent WHERE execution_id = %s ORDER BY at, id",
            [execution_id],
        )
        return [row[0] for row in cursor.fetchall()]


def _days() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'executions_executionevent'::regclass"
        )
        return {row[0] for row in cursor.fetchall()}


def _start(pk, at) -> int:
    transitions.queue_many([pk], now=at, publish_grace=LEASE)
    token = Execution.objects.get(pk=pk).lease_token
    assert transitions.start(execution_id=pk, lease_token=token, now=at, worker_id="w:1", lease=LEASE)
    return token


def _fail_and_retry(pk, at) -> None:
    token = _start(pk, at)
    assert transitions.fail(execution_id=pk, lease_token=token, now=at, error="boom", traceback="")
    assert transitions.retry(execution_id=pk, source=S.FAILED, now=at, available_at=at, message="retry")


def _execution(tenant, make_job, at):
    return make_job(tenant, run_at=at, now=at - timedelta(minutes=5)).executions.get()


def _timeline(pk) -> list[tuple]:
    return [(e.at, e.from_state, e.to_state, e.message) for e in history.timeline(Execution.objects.get(pk=pk))]


def test_partitions_are_made_ahead_once(tenant):
    """Today's and the next days' partitions are made by the sweeper's service; a second pass
    finds them all and makes none."""
    made = HistoryPartitions(ahead_days=3).run_once(now=DAY1 + timedelta(hours=13))
    again = HistoryPartitions(ahead_days=3).run_once(now=DAY1 + timedelta(hours=20))
    if connection.vendor != POSTGRES:
        assert made.total() == again.total() == 0
        return
    assert made.partitions_made == 4 and again.partitions_made == 0
    wanted = {f"executions_executionevent_p{(DAY1 + timedelta(days=n)):%Y%m%d}" for n in range(4)}
    assert wanted <= _days()
    assert HistoryPartitions(ahead_days=4).run_once(now=DAY1).partitions_made == 1  # only the one missing


def test_an_event_whose_day_has_no_partition_is_written_and_moves_in_when_it_is_made(tenant, make_job):
    """No partition for its day: the write still lands (DEFAULT), is read, and moves into the
    day's partition when the sweeper makes it; the timeline reads the same throughout."""
    pk = _execution(tenant, make_job, DAY1 + timedelta(hours=1)).pk
    _fail_and_retry(pk, DAY1 + timedelta(hours=1))
    before = _timeline(pk)
    assert len(before) == 5 and ExecutionEvent.objects.filter(execution_id=pk).count() == 5
    if connection.vendor == POSTGRES:
        assert set(_where(pk)) == {"executions_executionevent_default"}
    assert history_partitions_ahead(now=DAY1, days=0) == (1 if connection.vendor == POSTGRES else 0)
    if connection.vendor == POSTGRES:
        assert set(_where(pk)) == {f"executions_executionevent_p{DAY1:%Y%m%d}"}
    assert _timeline(pk) == before


def test_retention_drops_a_day_whole_and_keeps_the_timelines_across_days(tenant, make_job, api):
    """Day 1's partition goes once day 1 is past the retention, with the events of the execution
    pruned before it; the one still retrying, whose history spans days 1 and 2, keeps its whole
    timeline (its day-1 events are written again, elsewhere) and reads it in order across the
    boundary; when it too is pruned, its kept events go."""
    history_partitions_ahead(now=DAY1, days=2)
    gone = _execution(tenant, make_job, DAY1 + timedelta(hours=10)).pk
    _fail_and_retry(gone, DAY1 + timedelta(hours=10))
    token = _start(gone, DAY1 + timedelta(hours=11))
    assert transitions.succeed(execution_id=gone, lease_token=token, now=DAY1 + timedelta(hours=11), result=None)
    kept = _execution(tenant, make_job, DAY2 - timedelta(minutes=2)).pk
    _fail_and_retry(kept, DAY2 - timedelta(seconds=30))
    token = _start(kept, DAY2 + timedelta(seconds=30))  # attempt 2 runs into day 2
    whole = _timeline(kept)
    assert [at.date() for at, *_ in whole] == [DAY1.date()] * 5 + [DAY2.date()] * 2
    assert whole == sorted(whole, key=lambda e: e[0])
    if connection.vendor == POSTGRES:
        assert len(set(_where(kept))) == 2  # two days' partitions

    pruned = Retention(retention=timedelta(days=1)).run_once(now=DAY2 + timedelta(days=1, hours=1))

    assert pruned.pruned == 1 and not Execution.objects.filter(pk=gone).exists()
    assert not ExecutionEvent.objects.filter(execution_id=gone).exists()
    assert _timeline(kept) == whole
    served = api.get(f"/v1/executions/{kept}").json()["events"]  # the API's timeline, as the dashboard's
    assert [(e["from"] or "", e["to"], e["message"]) for e in served] == [(f, t, m) for _, f, t, m in whole]
    if connection.vendor == POSTGRES:
        assert pruned.partitions_dropped >= 1 and pruned.history_kept == 5
        assert f"executions_executionevent_p{DAY1:%Y%m%d}" not in _days()
        assert f"executions_executionevent_p{DAY2:%Y%m%d}" in _days()
        assert (
            _where(kept)
            == ["executions_executionevent_default"] * 5 + [f"executions_executionevent_p{DAY2:%Y%m%d}"] * 2
        )

    end = DAY2 + timedelta(minutes=1)
    assert transitions.succeed(execution_id=kept, lease_token=token, now=end, result=None)
    later = Retention(retention=timedelta(days=1)).run_once(now=DAY2 + timedelta(days=2, hours=1))
    assert later.pruned == 1 and not ExecutionEvent.objects.filter(execution_id=kept).exists()
    if connection.vendor == POSTGRES:
        assert later.history_pruned == 5 and later.history_kept == 0


def test_retention_drops_no_partition_while_executions_past_it_wait_for_a_batch(tenant, make_job, monkeypatch):
    """A full batch of executions pruned: more wait, so no partition is dropped in that pass (its
    events of executions still to prune would only be kept, then deleted one by one)."""
    calls = []
    monkeypatch.setattr("maintenance.services.retention.history_partitions_drop", lambda **kw: calls.append(kw))
    monkeypatch.setattr("maintenance.services.retention.transitions.prune_many", lambda **kw: (2, set()))
    assert Retention(retention=timedelta(days=1), batch=2).run_once(now=DAY2).partitions_dropped == 0
    assert calls == []


def test_a_sweeper_whose_turn_another_holds_makes_nothing_and_fails_nothing(tenant):
    """Two sweepers at once: the one that does not get the partitions' advisory lock skips (the
    other makes them); once it is free, the next pass makes them."""
    if connection.vendor != POSTGRES:
        pytest.skip("no partitions on the embedded default")
    import psycopg

    from store.postgres.partitions import ADVISORY_KEY

    s = connection.settings_dict
    other = psycopg.connect(
        dbname=s["NAME"], user=s["USER"], host=s["HOST"], port=s["PORT"] or 5432, password=s["PASSWORD"] or None
    )
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [ADVISORY_KEY])
        assert history_partitions_ahead(now=DAY1, days=1) == 0
        other.execute("SELECT pg_advisory_unlock(%s)", [ADVISORY_KEY])
        assert history_partitions_ahead(now=DAY1, days=1) == 2
    finally:
        other.close()
