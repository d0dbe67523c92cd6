"""The store's pipelined block (statements sent without waiting for each other) and its together
block (a create's writes sent as one statement): on PostgreSQL one round trip, on the embedded
default each statement as it comes; on both, an error surfaces as Django's."""

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, connection, transaction
from psycopg import pq

from jobs.models import Job, JobType
from store import store
from tenants.services import tenant_create

pytestmark = pytest.mark.django_db

RUN_AT = datetime(2030, 1, 1, tzinfo=UTC)


def _job(tenant, **fields) -> Job:
    return Job(
        tenant=tenant, name="nightly", type=JobType.ONCE, run_at=RUN_AT, pool="default", handler="noop", **fields
    )


@pytest.mark.parametrize("block", ["pipelined", "together"])
def test_a_failed_write_is_the_databases_error_at_the_blocks_end_and_leaves_nothing(block):
    tenant = tenant_create(slug="acme")
    first = _job(tenant)
    with pytest.raises(IntegrityError), transaction.atomic():
        with getattr(store(), block)():
            store().insert_new([first])
            store().insert_new([_job(tenant, id=first.id)])  # the same key again
    assert not Job.objects.exists()
    # The connection is usable after it: the next write lands.
    store().insert_new([_job(tenant)])
    assert Job.objects.count() == 1


def test_writes_in_the_block_go_in_pipeline_mode_and_land():
    if connection.vendor != "postgresql":
        pytest.skip("the embedded default sends each statement as it comes")
    tenant = tenant_create(slug="acme")
    connection.ensure_connection()
    sent: list[str] = []

    def record(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with transaction.atomic(), connection.execute_wrapper(record):
        with store().pipelined():
            assert connection.connection.pgconn.pipeline_status == pq.PipelineStatus.ON
            store().insert_new([_job(tenant)])
            store().insert_new([_job(tenant)])
            store().notify_due(datetime.now(UTC))  # due now: a wake-up is sent
        assert connection.connection.pgconn.pipeline_status == pq.PipelineStatus.OFF
    assert len(sent) == 3
    assert Job.objects.count() == 2


# --- together(): a create's writes as one statement -------------------------------------------


def _sent_in(block) -> tuple[list[str], object]:
    """The statements `block` sent, and what it returned."""
    connection.ensure_connection()
    sent: list[str] = []

    def record(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        result = block()
    return sent, result


def test_writes_together_land_and_on_postgresql_go_as_one_statement():
    tenant = tenant_create(slug="acme")
    jobs = [_job(tenant), _job(tenant)]

    def block():
        with transaction.atomic(), store().together():
            store().insert_new(jobs[:1])
            store().notify_due(datetime.now(UTC))  # due now: a wake-up, the one SELECT
            store().insert_new(jobs[1:])

    sent, _ = _sent_in(block)
    assert Job.objects.count() == 2
    if connection.vendor == "postgresql":
        [statement] = [sql for sql in sent if "SAVEPOINT" not in sql]  # the test's transaction
        assert statement.count("INSERT INTO") == 2 and "pg_notify" in statement
    else:
        assert len(sent) >= 2  # the embedded default sends each as it comes


def test_an_error_inside_the_block_sends_none_of_its_writes():
    tenant = tenant_create(slug="acme")
    with pytest.raises(RuntimeError), transaction.atomic():
        with store().together():
            store().insert_new([_job(tenant)])
            raise RuntimeError("the caller's own failure")
    assert not Job.objects.exists()
    with store().together():  # and the next block holds only its own
        store().insert_new([_job(tenant)])
    assert Job.objects.count() == 1
