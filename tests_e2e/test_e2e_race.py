"""Racing dispatchers and duplicate deliveries, with real processes: each execution starts once."""

import re
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from background.publisher import Dispatch, InMemoryPublisher
from dispatcher import dispatcher
from executions.models import Execution, ExecutionEvent
from executions.standing import completed
from jobs.models import Job
from testing.harness import execution_in, history, wait_for

pytestmark = pytest.mark.e2e
# Five claims of a full batch (TICKWORK_DISPATCH_BATCH, 1,000) between three dispatchers: each
# finds the others' locks in its way more than once, and twice as many only doubles the CPU.
N = 5_000
# SQLite has one writer at a time, and the race's point is the same with fewer (and a fifth of the time).
N_SQLITE = 1_000


def _bulk_one_off_jobs(tenant, n: int, *, due) -> None:
    """n ONCE jobs, each with its PENDING execution, in a few bulk inserts: every second one's
    history told by its columns (as a new execution's: store/history.py), the others' written as
    rows from their first event on (as an execution's made before that)."""
    jobs = [
        Job(tenant=tenant, name=f"race {i}", type="ONCE", run_at=due, next_fire_at=due, pool="default", handler="noop")
        for i in range(n)
    ]
    Job.objects.bulk_create(jobs, batch_size=2000)
    executions = [
        Execution(
            job=job,
            tenant_id=tenant.pk,
            pool="default",
            priority=1,
            scheduled_for=due,
            available_at=due,
            history_derived=i % 2 == 0,
        )
        for i, job in enumerate(jobs)
    ]
    Execution.objects.bulk_create(executions, batch_size=2000)
    ExecutionEvent.objects.bulk_create(
        [
            ExecutionEvent(execution=e, at=timezone.now(), to_state="PENDING", attempt=1)
            for e in executions
            if not e.history_derived
        ],
        batch_size=2000,
    )


def test_three_dispatchers_claim_each_of_thousands_of_due_executions_exactly_once(live, tenant):
    """5,000 executions (1,000 on SQLite) fall due at the same instant under three racing
    dispatchers: every one is claimed exactly once (one PENDING→QUEUED event, lease_token 1) and,
    with workers running noop, started exactly once (one QUEUED→RUNNING) and SUCCEEDED; the claims
    are spread over the dispatchers, whose batches add up to exactly that many. Those whose history
    is told by their columns stay so (no row: nothing moved them off the happy path)."""
    n = N if connection.vendor == "postgresql" else N_SQLITE
    for _ in range(2):
        live.worker(concurrency=3, wait=False)
    dispatchers = [live.dispatcher() for _ in range(3)]
    _bulk_one_off_jobs(tenant, n, due=timezone.now() + timedelta(days=1))  # not due yet
    live.ready()

    # All due at one instant, a moment from now: one statement, so no dispatcher sees a part.
    due = timezone.now() + timedelta(seconds=1)
    assert Execution.objects.update(available_at=due, scheduled_for=due) == n
    started = time.monotonic()
    wait_for(
        lambda: Execution.objects.filter(state="SUCCEEDED").count() == n,
        timeout=300,  # about 15 s on an idle 2-core VM; generous for a busy one
        interval=1.0,
        what=f"all {n} executions to succeed",
    )
    elapsed = time.monotonic() - started

    assert not Execution.objects.exclude(lease_token=1).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT e.id,
                   count(*) FILTER (WHERE ev.from_state = 'PENDING' AND ev.to_state = 'QUEUED'),
                   count(*) FILTER (WHERE ev.from_state = 'QUEUED' AND ev.to_state = 'RUNNING'),
                   count(*) FILTER (WHERE ev.to_state = 'SUCCEEDED'),
                   count(*)
            FROM executions_execution e JOIN executions_executionevent ev ON ev.execution_id = e.id
            GROUP BY e.id
            """
        )
        counts = cursor.fetchall()
    assert len(counts) == n - n // 2
    assert Execution.objects.filter(history_derived=True).count() == n // 2
    wrong = [row for row in counts if row[1:] != (1, 1, 1, 4)]
    assert not wrong, f"{len(wrong)} executions were not claimed/started/finished exactly once: {wrong[:5]}"
    claimed = [sum(int(n) for n in re.findall(r"claimed (\d+)", dispatcher.log())) for dispatcher in dispatchers]
    assert sum(claimed) == n, claimed
    assert sum(1 for n in claimed if n) >= 2, f"the dispatchers did not race: {claimed}"
    assert Job.objects.filter(completed()).count() == n
    print(f"{n} executions in {elapsed:.1f}s; claims per dispatcher {claimed}")


def test_duplicate_and_stale_deliveries_never_start_a_second_run(live, tenant, make_job):
    """The broker may deliver twice: the same (execution, lease token) message published twice
    starts the run once, and a message with a stale lease token is dropped even while the row
    is still QUEUED. One QUEUED→RUNNING transition in all."""
    worker = live.worker(concurrency=2)
    job = make_job(tenant, run_at=timezone.now(), handler="sleep", payload={"seconds": 0.5})
    execution = Execution.objects.get(job=job)
    claimed = InMemoryPublisher()
    dispatcher.run_once(now=timezone.now(), publisher=claimed)
    (message,) = claimed.sent
    assert message.lease_token == 1

    live.publisher.publish([Dispatch(message.execution_id, 0, message.pool, message.priority)])
    wait_for(
        lambda: f"dropping delivery of {execution.pk} (lease 0)" in worker.log(),
        timeout=10,
        what="the stale delivery to be dropped",
    )
    assert Execution.objects.get(pk=execution.pk).state == "QUEUED"

    live.publisher.publish([message, message])
    done = wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=10, what="the run to succeed")
    wait_for(
        lambda: f"dropping delivery of {execution.pk} (lease 1)" in worker.log(),
        timeout=10,
        what="the duplicate delivery to be dropped",
    )

    assert history(done.pk) == [("", "PENDING"), ("PENDING", "QUEUED"), ("QUEUED", "RUNNING"), ("RUNNING", "SUCCEEDED")]
    assert worker.log().count("dropping delivery of") == 2
