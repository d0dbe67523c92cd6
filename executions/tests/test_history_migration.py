"""Migration executions 0021 on a populated history (PostgreSQL): the plain table becomes the
partitioned one in the migration's transaction, every row kept with its id in its day's partition,
new ids past the old ones; backwards, the plain table again with the same rows."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from executions import history
from executions.models import Execution, ExecutionEvent

BEFORE, AFTER = ("executions", "0020_execution_tenant_without_constraint"), ("executions", "0021_history_partitioned")


def _migrate(target) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([target])


def _rows() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, execution_id, at, to_state, tableoid::regclass::text FROM executions_executionevent ORDER BY id"
        )
        return cursor.fetchall()


@pytest.mark.django_db(transaction=True)
def test_a_populated_history_is_partitioned_by_day_and_back(tenant, make_job):
    if connection.vendor != "postgresql":
        pytest.skip("the embedded default keeps its plain table (nothing to convert)")
    execution = make_job(tenant).executions.get()
    day = execution.created_at.replace(hour=0, minute=0, second=0, microsecond=0)  # UTC
    Execution.objects.filter(pk=execution.pk).update(history_derived=False)
    _migrate(BEFORE)
    with connection.cursor() as cursor:
        for n in range(6):  # three days, two events each, one at a day's last second
            cursor.execute(
                "INSERT INTO executions_executionevent (execution_id, at, from_state, to_state, attempt, worker_id,"
                " message) VALUES (%s, %s, '', %s, 1, '', '')",
                [execution.pk, day + timedelta(days=n // 2, seconds=86_399 * (n % 2)), f"S{n}"],
            )
    before = _rows()
    assert {r[4] for r in before} == {"executions_executionevent"}

    _migrate(AFTER)

    after = _rows()
    assert [r[:4] for r in after] == [r[:4] for r in before]
    assert [r[4] for r in after] == [
        f"executions_executionevent_p{(day + timedelta(days=n // 2)):%Y%m%d}" for n in range(6)
    ]
    assert [e.to_state for e in history.timeline(Execution.objects.get(pk=execution.pk))] == [f"S{n}" for n in range(6)]
    new = ExecutionEvent.objects.create(execution_id=execution.pk, at=day, to_state="X", attempt=1)
    assert new.pk > before[-1][0]

    _migrate(BEFORE)
    assert [r[:4] for r in _rows()] == [r[:4] for r in after] + [(new.pk, execution.pk, day, "X")]
    _migrate(AFTER)
    assert len(_rows()) == 7
