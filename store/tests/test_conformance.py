"""The store's conformance suite: every named operation of store/interface.py, run against the
store for the database in use. `make test` runs it on PostgreSQL (PostgresStore), the embedded
run on SQLite (SqliteStore); both must answer alike. Marked `store`, so that a run can select
just what differs between the stores (`-m store`). A new operation without a test here fails
`test_every_operation_is_covered`."""

import ast
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone

from executions.models import Execution, ExecutionEvent, Run
from executions.states import ExecutionState as S
from jobs.models import Job
from pools.models import RateLimit
from pools.rate_limits import Limit
from store import Fire, Store, Success, store
from testing import harness

pytestmark = [pytest.mark.store, pytest.mark.django_db]

LEASE = timedelta(seconds=30)
WORKFLOW = {
    "steps": [
        {"name": "a", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []},
        {"name": "b", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["a"]},
        {"name": "c", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["a"]},
    ]
}


def _started(now) -> dict:
    return {"started_at": now, "heartbeat_at": now, "worker_id": "h:1", "republish_at": None}


def _execution(make_job, tenant, now, **fields) -> Execution:
    """A one-off job's first execution, PENDING and due a minute ago."""
    return make_job(
        tenant, run_at=now - timedelta(minutes=1), now=now - timedelta(minutes=2), **fields
    ).executions.get()


def _queued(make_job, tenant, now, **fields) -> Execution:
    execution = _execution(make_job, tenant, now, **fields)
    (moved,), _ = store().queue([execution.pk], now=now, republish_at=now + LEASE)
    return Execution.objects.get(pk=moved.id)


def _running(make_job, tenant, now, **fields) -> Execution:
    execution = _queued(make_job, tenant, now, **fields)
    assert store().start(
        execution_id=execution.pk, lease_token=execution.lease_token, now=now, lease=LEASE, values=_started(now)
    )
    return Execution.objects.get(pk=execution.pk)


def _fire(make_job, tenant, now) -> Execution:
    """An INTERVAL job's first fire, PENDING and due a minute ago."""
    return make_job(
        tenant, type="INTERVAL", every_sec=60, start_at=now - timedelta(minutes=1), now=now
    ).executions.get()


def _running_fire(make_job, tenant, now) -> Execution:
    """An INTERVAL job's first fire, RUNNING."""
    execution = _fire(make_job, tenant, now)
    (moved,), _ = store().queue([execution.pk], now=now, republish_at=now + LEASE)
    assert store().start(
        execution_id=execution.pk, lease_token=moved.lease_token, now=now, lease=LEASE, values=_started(now)
    )
    return Execution.objects.get(pk=execution.pk)


def _events(execution) -> list[tuple[str, str, str]]:
    """Its history as written (rows, or told by its columns: store/history.py)."""
    return [(e.from_state, e.to_state, e.message) for e in harness.events(execution.pk)]


def _rows(execution) -> list[tuple[str, str, str]]:
    """Its history's rows only."""
    return list(
        ExecutionEvent.objects.filter(execution_id=execution.pk)
        .order_by("id")
        .values_list("from_state", "to_state", "message")
    )


# --- one execution ----------------------------------------------------------------------------------------


def test_move_moves_one_row_from_its_source_only_with_its_event(tenant, make_job, now):
    execution = _execution(make_job, tenant, now)
    values = {"queued_at": now, "republish_at": now + LEASE}

    change = store().move(
        execution_id=execution.pk, source=S.PENDING, target=S.QUEUED, now=now, values=values, message="m"
    )
    again = store().move(execution_id=execution.pk, source=S.PENDING, target=S.QUEUED, now=now, values=values)

    assert change == (execution.pk, execution.job_id, tenant.pk, S.QUEUED)
    assert again is None
    assert _events(execution)[-1] == (S.PENDING, S.QUEUED, "m")


def test_move_to_a_finished_state_writes_nothing_of_the_job_which_reads_completed(tenant, make_job, now):
    execution = _execution(make_job, tenant, now)
    before = Job.objects.values("state", "updated_at", "next_fire_at").get(pk=execution.job_id)

    store().move(execution_id=execution.pk, source=S.PENDING, target=S.CANCELLED, now=now, values={"finished_at": now})

    assert Job.objects.values("state", "updated_at", "next_fire_at").get(pk=execution.job_id) == before
    assert Job.objects.get(pk=execution.job_id).standing == "COMPLETED"


def test_start_runs_a_queued_execution_under_its_lease_and_reads_what_its_handler_needs(tenant, make_job, now):
    execution = _queued(make_job, tenant, now, payload={"n": 1})

    wrong = store().start(
        execution_id=execution.pk, lease_token=execution.lease_token + 1, now=now, lease=LEASE, values={}
    )
    started, change = store().start(
        execution_id=execution.pk, lease_token=execution.lease_token, now=now, lease=LEASE, values=_started(now)
    )

    assert wrong is None
    assert (started.id, started.handler, started.payload, started.tenant_slug) == (
        execution.pk,
        "noop",
        {"n": 1},
        tenant.slug,
    )
    assert change[3] == S.RUNNING
    row = Execution.objects.get(pk=execution.pk)
    assert (row.state, row.worker_id, row.lease_expires_at) == (S.RUNNING, "h:1", now + LEASE)
    assert row.timeout_at is not None


def test_start_times_a_workflow_step_by_its_own_timeout(tenant, make_job, now):
    """A step's own `timeout_sec`, as its run keeps it (jobs/workflow.py), not its job's."""
    steps = [{**WORKFLOW["steps"][0], "timeout_sec": 7}]
    job = make_job(tenant, workflow={"steps": steps}, pool="", handler="", run_at=now, now=now, timeout_sec=3600)
    step = Execution.objects.get(run__job=job, step="a")
    store().queue([step.pk], now=now, republish_at=now + LEASE)
    queued = Execution.objects.get(pk=step.pk)

    assert store().start(
        execution_id=step.pk, lease_token=queued.lease_token, now=now, lease=LEASE, values=_started(now)
    )

    assert Execution.objects.get(pk=step.pk).timeout_at == now + timedelta(seconds=7)


def test_succeed_many_records_each_success_under_its_own_lease(tenant, make_job, now):
    first, second = _running(make_job, tenant, now), _running(make_job, tenant, now)
    successes = [
        Success(first.pk, first.lease_token, {"ok": 1}, now),
        Success(second.pk, second.lease_token + 1, {"ok": 2}, now),  # a lease that moved on
    ]

    changes = store().succeed_many(successes, now=now, result_of=lambda success: success.result)

    assert [(change[0], change[3]) for change in changes] == [(first.pk, S.SUCCEEDED)]
    assert Execution.objects.get(pk=first.pk).result == {"ok": 1}
    assert Execution.objects.get(pk=second.pk).state == S.RUNNING
    assert Job.objects.get(pk=first.job_id).standing == "COMPLETED"


def test_a_success_starts_its_jobs_count_of_failed_fires_again(tenant, make_job, now):
    """Through `move` and `succeed_many` alike, and only the job's whose fire succeeded."""
    moved, batched, other = (_running_fire(make_job, tenant, now) for _ in range(3))
    Job.objects.filter(pk__in=[moved.job_id, batched.job_id, other.job_id]).update(failed_fires=2)

    store().move(
        execution_id=moved.pk,
        source=S.RUNNING,
        target=S.SUCCEEDED,
        now=now,
        values={"finished_at": now},
        lease_token=moved.lease_token,
    )
    store().succeed_many([Success(batched.pk, batched.lease_token, None, now)], now=now, result_of=lambda success: None)

    counts = dict(Job.objects.values_list("pk", "failed_fires"))
    assert (counts[moved.job_id], counts[batched.job_id], counts[other.job_id]) == (0, 0, 2)


def _dead(execution, now) -> None:
    store().move(execution_id=execution.pk, source=execution.state, target=S.DEAD, now=now, values={})


def test_count_failed_fire_counts_a_dead_fire_of_a_job_with_pause_after_failures(tenant, make_job, now):
    counting, not_counting, still_pending = (_fire(make_job, tenant, now) for _ in range(3))
    Job.objects.filter(pk__in=[counting.job_id, still_pending.job_id]).update(pause_after_failures=3, failed_fires=1)
    _dead(counting, now)
    _dead(not_counting, now)

    counted = store().count_failed_fire(execution_id=counting.pk)

    assert counted == (counting.job_id, 2, 3)
    assert Job.objects.get(pk=counting.job_id).failed_fires == 2
    assert store().count_failed_fire(execution_id=not_counting.pk) is None  # no pauseAfterFailures
    assert store().count_failed_fire(execution_id=still_pending.pk) is None  # not DEAD
    assert Job.objects.get(pk=not_counting.job_id).failed_fires == 0


def test_count_failed_fire_counts_a_workflow_run_once(tenant, make_job, now):
    """The first step of a run to end DEAD counts the run; another of the same run does not."""
    job = make_job(tenant, type="INTERVAL", every_sec=60, start_at=now, workflow=WORKFLOW, pool="", handler="", now=now)
    Job.objects.filter(pk=job.pk).update(pause_after_failures=2)
    run = Run.objects.get(job=job)
    store().release_steps(run_id=run.pk, names=["b", "c"], now=now, message="go")
    b, c = Execution.objects.get(run=run, step="b"), Execution.objects.get(run=run, step="c")
    _dead(b, now)
    first = store().count_failed_fire(execution_id=b.pk)
    _dead(c, now)

    assert first == (job.pk, 1, 2)
    assert store().count_failed_fire(execution_id=c.pk) is None
    assert Job.objects.get(pk=job.pk).failed_fires == 1


def test_heartbeat_extends_the_lease_of_the_worker_holding_it(tenant, make_job, now):
    execution = _running(make_job, tenant, now)
    later = now + timedelta(seconds=5)

    beat = store().heartbeat(execution_id=execution.pk, lease_token=execution.lease_token, now=later, lease=LEASE)
    lost = store().heartbeat(execution_id=execution.pk, lease_token=execution.lease_token + 1, now=later, lease=LEASE)

    assert beat is not None and beat.cancel_requested_at is None and beat.timeout_at == execution.timeout_at
    assert lost is None
    assert Execution.objects.get(pk=execution.pk).lease_expires_at == later + LEASE


# --- sets of executions -----------------------------------------------------------------------------------


def test_queue_takes_the_pending_ones_each_under_a_new_lease(tenant, make_job, now):
    pending, cancelled = _execution(make_job, tenant, now), _execution(make_job, tenant, now)
    store().move(execution_id=cancelled.pk, source=S.PENDING, target=S.CANCELLED, now=now, values={"finished_at": now})

    moved, changes = store().queue([pending.pk, cancelled.pk], now=now, republish_at=now + LEASE)

    assert [(m.id, m.lease_token) for m in moved] == [(pending.pk, pending.lease_token + 1)]
    assert changes == [(pending.pk, pending.job_id, tenant.pk, S.QUEUED)]
    row = Execution.objects.get(pk=pending.pk)
    assert (row.queued_at, row.republish_at, row.publish_count) == (now, now + LEASE, 1)
    assert _events(row)[-1][:2] == (S.PENDING, S.QUEUED)


def test_discard_dead_takes_the_dead_ones(tenant, make_job, now):
    dead, pending = _execution(make_job, tenant, now), _execution(make_job, tenant, now)
    Execution.objects.filter(pk=dead.pk).update(state=S.DEAD, finished_at=now)

    moved, _ = store().discard_dead([dead.pk, pending.pk], now=now, message="gone")

    assert [m.id for m in moved] == [dead.pk]
    assert _events(dead)[-1] == (S.DEAD, S.DISCARDED, "gone")


def test_rescue_lost_takes_the_expired_leases_nobody_asked_to_cancel(tenant, make_job, now):
    lost, asked, alive = (_running(make_job, tenant, now) for _ in range(3))
    later = now + LEASE + timedelta(seconds=1)
    store().heartbeat(execution_id=alive.pk, lease_token=alive.lease_token, now=later, lease=LEASE)
    Execution.objects.filter(pk=asked.pk).update(cancel_requested_at=now)

    moved, _ = store().rescue_lost(now=later, limit=10, error="lost", error_fingerprint="f")

    assert [m.id for m in moved] == [lost.pk]
    row = Execution.objects.get(pk=lost.pk)
    assert (row.state, row.error, row.error_fingerprint, row.finished_at) == (S.FAILED_WORKER_LOST, "lost", "f", later)


def test_a_sweepers_batch_moves_at_most_its_limit(tenant, make_job, now):
    """The bound is what keeps a sweeper's pass short after a fleet dies: five lost leases and a
    limit of two move two, then two, then one."""
    for _ in range(5):
        _running(make_job, tenant, now)
    later = now + LEASE + timedelta(seconds=1)

    sizes = [len(store().rescue_lost(now=later, limit=2, error="lost", error_fingerprint="f")[0]) for _ in range(4)]

    assert sizes == [2, 2, 1, 0]


def test_time_out_overdue_takes_the_runs_past_their_timeout(tenant, make_job, now):
    late, in_time = _running(make_job, tenant, now), _running(make_job, tenant, now)
    Execution.objects.filter(pk=late.pk).update(timeout_at=now)

    moved, _ = store().time_out_overdue(
        now=now, before=now + timedelta(seconds=1), limit=10, error="late", error_fingerprint="f"
    )

    assert [m.id for m in moved] == [late.pk]
    assert Execution.objects.get(pk=late.pk).state == S.TIMED_OUT
    assert Execution.objects.get(pk=in_time.pk).state == S.RUNNING


def test_force_cancel_takes_the_requests_not_heeded(tenant, make_job, now):
    asked, fresh = _running(make_job, tenant, now), _running(make_job, tenant, now)
    Execution.objects.filter(pk=asked.pk).update(cancel_requested_at=now - timedelta(minutes=5))
    Execution.objects.filter(pk=fresh.pk).update(cancel_requested_at=now)

    moved, _ = store().force_cancel(now=now, requested_before=now - timedelta(minutes=1), limit=10, message="forced")

    assert [m.id for m in moved] == [asked.pk]
    assert Job.objects.get(pk=asked.job_id).standing == "COMPLETED"


def test_release_cancel_and_reblock_steps_move_the_named_steps_of_a_run(tenant, make_job, now):
    job = make_job(tenant, workflow=WORKFLOW, pool="", handler="", run_at=now, now=now)
    run = Run.objects.get(job=job)

    released, _ = store().release_steps(run_id=run.pk, names=["b"], now=now, message="go")
    cancelled, _ = store().cancel_steps(run_id=run.pk, names=["c"], now=now, message="no")
    reblocked, _ = store().reblock_steps(
        run_id=run.pk, names=["c"], now=now, message="again", fresh={"finished_at": None, "worker_id": ""}
    )

    assert [(m.run_id, Execution.objects.get(pk=m.id).step) for m in released] == [(run.pk, "b")]
    assert len(cancelled) == len(reblocked) == 1
    states = dict(Execution.objects.filter(run=run).values_list("step", "state"))
    assert states == {"a": S.PENDING, "b": S.PENDING, "c": S.BLOCKED}
    c = Execution.objects.get(run=run, step="c")
    assert (c.finished_at, c.attempt) == (None, 1)  # it had not started: the same attempt
    assert [event[2] for event in _events(c)][-2:] == ["no", "again"]


# --- executions without a move -----------------------------------------------------------------------------


def test_request_cancel_records_the_request_once(tenant, make_job, now):
    execution = _running(make_job, tenant, now)

    assert store().request_cancel(execution_id=execution.pk, now=now, message="asked")
    assert not store().request_cancel(execution_id=execution.pk, now=now, message="asked again")
    assert Execution.objects.get(pk=execution.pk).cancel_requested_at == now
    assert _events(execution)[-1] == (S.RUNNING, S.RUNNING, "asked")


def test_republish_stalled_doubles_the_grace_of_the_queued_ones_not_started(tenant, make_job, now):
    execution = _queued(make_job, tenant, now)
    later = now + LEASE + timedelta(seconds=1)

    (again,) = store().republish_stalled(now=later, grace_seconds=10, limit=10)

    assert (again.id, again.lease_token) == (execution.pk, execution.lease_token)
    row = Execution.objects.get(pk=execution.pk)
    assert (row.publish_count, row.republish_at) == (2, later + timedelta(seconds=20))
    assert store().republish_stalled(now=later, grace_seconds=10, limit=10) == []


def test_lock_finished_names_the_executions_finished_before_a_time(tenant, make_job, now):
    old, new, _open = (_execution(make_job, tenant, now) for _ in range(3))
    Execution.objects.filter(pk=old.pk).update(state=S.SUCCEEDED, finished_at=now - timedelta(days=2))
    Execution.objects.filter(pk=new.pk).update(state=S.SUCCEEDED, finished_at=now)

    with transaction.atomic():
        assert store().lock_finished(before=now - timedelta(days=1), limit=10) == [old.pk]


# --- writes ---------------------------------------------------------------------------------------------


def _job(tenant) -> Job:
    return Job(
        id=uuid.uuid4(), tenant=tenant, name="j", type="ONCE", pool="default", handler="noop", run_at=timezone.now()
    )


def test_insert_new_pipelined_and_together_write_new_rows(tenant):
    jobs = [_job(tenant) for _ in range(3)]

    with store().pipelined():
        store().insert_new(jobs[:1])
    with transaction.atomic(), store().together():
        store().insert_new(jobs[1:])

    assert Job.objects.filter(pk__in=[j.pk for j in jobs]).count() == 3


@pytest.mark.parametrize(
    "payloads",
    [
        [{}, {}, {}],  # the same JSON in every row: sent once
        [{"a": 1}, {"a": True}, {"a": 1.0}],  # equal in Python, yet other JSON
        [{"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}, {"a": [1, {"b": 0}]}],
        [{"x": 2.5}, {"x": 2.5}, {"x": "2.5"}],
    ],
)
def test_insert_new_writes_each_row_s_json(tenant, payloads):
    jobs = [_job(tenant) for _ in payloads]
    for job, payload in zip(jobs, payloads, strict=True):
        job.payload = payload

    with transaction.atomic(), store().together():
        store().insert_new(jobs)

    stored = dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("id", "payload"))
    for job, payload in zip(jobs, payloads, strict=True):
        assert repr(stored[job.pk]) == repr(payload)


def test_record_events_appends_history(tenant, make_job, now):
    execution = _execution(make_job, tenant, now)

    store().record_events([(execution.pk, 1, "w")], source=S.PENDING, target=S.PENDING, now=now, message="note")

    assert _rows(execution)[-1] == (S.PENDING, S.PENDING, "note")


# --- the history: told by the columns on the happy path, rows off it (store/history.py) ------------------


def test_a_happy_run_writes_no_history_row_and_its_columns_tell_it(tenant, make_job, now):
    running = _running(make_job, tenant, now)
    done = now + timedelta(seconds=1)
    store().succeed_many([Success(running.pk, running.lease_token, 1, done)], now=done, result_of=lambda s: s.result)

    row = Execution.objects.get(pk=running.pk)
    assert (row.state, row.history_derived, _rows(row)) == (S.SUCCEEDED, True, [])
    assert [(e.at, e.from_state, e.to_state, e.attempt, e.worker_id, e.message) for e in harness.events(row.pk)] == [
        (now - timedelta(minutes=2), "", S.PENDING, 1, "", "scheduled"),
        (now, S.PENDING, S.QUEUED, 1, "", ""),
        (now, S.QUEUED, S.RUNNING, 1, "h:1", "started"),
        (done, S.RUNNING, S.SUCCEEDED, 1, "h:1", "succeeded"),
    ]


def test_a_move_off_the_happy_path_writes_the_history_so_far_as_rows_first(tenant, make_job, now):
    """One move (a release, which clears the started_at the history reads), a set of moves (a
    rescue), and the events that are not moves (a cancel request, a publish again) each write the
    derived events as rows before their own, in order, and leave the history rows from then on."""
    later = now + LEASE + timedelta(seconds=1)
    made, queued, started = ("", S.PENDING, "scheduled"), (S.PENDING, S.QUEUED, ""), (S.QUEUED, S.RUNNING, "started")

    released = _running(make_job, tenant, now)
    assert store().move(
        execution_id=released.pk,
        source=S.RUNNING,
        target=S.PENDING,
        now=later,
        lease_token=released.lease_token,
        message="bye",
        values={"available_at": later, "lease_expires_at": None, "timeout_at": None, "started_at": None},
    )
    assert _rows(released) == [made, queued, started, (S.RUNNING, S.PENDING, "bye")]
    row = ExecutionEvent.objects.get(execution_id=released.pk, to_state=S.RUNNING)
    assert (row.at, row.worker_id) == (now, "h:1")
    store().queue([released.pk], now=later, republish_at=later + LEASE)
    assert _rows(released)[-1] == queued  # rows from then on
    assert not Execution.objects.get(pk=released.pk).history_derived

    lost = _running(make_job, tenant, now)
    rescued, _ = store().rescue_lost(now=later, limit=10, error="lost", error_fingerprint="f")
    assert lost.pk in {m.id for m in rescued}
    assert _rows(lost) == [made, queued, started, (S.RUNNING, S.FAILED_WORKER_LOST, "lost")]

    asked = _running(make_job, tenant, now + timedelta(seconds=60))
    assert store().request_cancel(execution_id=asked.pk, now=later, message="please")
    assert _rows(asked) == [made, queued, started, (S.RUNNING, S.RUNNING, "please")]

    stalled = _queued(make_job, tenant, now)
    assert stalled.pk in {r.id for r in store().republish_stalled(now=later, grace_seconds=30, limit=10)}
    assert _rows(stalled)[:2] == [made, queued]
    assert _rows(stalled)[2][:2] == (S.QUEUED, S.QUEUED)

    pending = _execution(make_job, tenant, now)
    assert store().move(
        execution_id=pending.pk, source=S.PENDING, target=S.CANCELLED, now=later, message="no", values={}
    )
    assert _rows(pending) == [made, (S.PENDING, S.CANCELLED, "no")]
    assert not any(Execution.objects.filter(pk__in=[lost.pk, asked.pk, stalled.pk, pending.pk], history_derived=True))


def test_a_history_written_as_rows_before_is_read_as_rows_only(tenant, make_job, now):
    """An execution made before its history could be derived (migrated with history_derived
    false) keeps its rows, and its columns add nothing to them: no event is read twice."""
    execution = _execution(make_job, tenant, now)
    Execution.objects.filter(pk=execution.pk).update(history_derived=False)
    store().record_events([(execution.pk, 1, "")], source="", target=S.PENDING, now=now, message="scheduled")
    store().queue([execution.pk], now=now, republish_at=now + LEASE)

    assert _rows(execution) == [("", S.PENDING, "scheduled"), (S.PENDING, S.QUEUED, "")]
    assert _events(execution) == _rows(execution)


def test_create_fires_makes_each_fire_once(tenant, make_job, now):
    job = make_job(tenant, type="CRON", schedule="0 * * * *", now=now)
    at = now.replace(microsecond=0) + timedelta(days=3)
    fire = Fire(job.pk, tenant.pk, "default", 1, at)

    assert store().create_fires([fire], now=now) == 1
    assert store().create_fires([fire], now=now) == 0
    made = Execution.objects.get(job=job, scheduled_for=at)
    assert (made.state, made.origin, _events(made)) == (S.PENDING, "SCHEDULE", [("", S.PENDING, "scheduled")])


def test_create_fires_makes_a_fire_given_twice_once_beside_another_origins_run(tenant, make_job, now):
    """The same fire twice in one batch is made once (PostgreSQL: its probe passes both, the index
    refuses the second, and the batch is made again skipping it); a run now at the fire's time is
    no fire of the schedule and does not stop it."""
    job = make_job(tenant, type="CRON", schedule="0 * * * *", now=now)
    at = now.replace(microsecond=0) + timedelta(days=3)
    Execution.objects.create(
        job=job, tenant=tenant, pool="default", origin="TRIGGER", scheduled_for=at, available_at=at
    )
    fire, other = Fire(job.pk, tenant.pk, "default", 1, at), Fire(job.pk, tenant.pk, "default", 1, at + LEASE)

    with transaction.atomic():  # as the dispatcher's claim makes them
        assert store().create_fires([fire, other, fire], now=now) == 2
    assert sorted(Execution.objects.filter(job=job, scheduled_for__gte=at).values_list("origin", "scheduled_for")) == [
        ("SCHEDULE", at),
        ("SCHEDULE", at + LEASE),
        ("TRIGGER", at),
    ]


def test_advance_jobs_and_job_rows(tenant, make_job, now):
    job = make_job(tenant, type="CRON", schedule="0 * * * *", now=now)
    fire = now + timedelta(hours=5)

    store().advance_jobs({job.pk: fire})

    assert store().job_rows([job.pk], ["id", "next_fire_at", "schedule"]) == [(job.pk, fire, "0 * * * *")]


# --- rate limits (pools/rate_limits.py) ----------------------------------------------------------------------


def test_rate_limits_read_under_the_claim_with_their_clocks_and_save_them():
    RateLimit.objects.create(name="payments", per_second=5, burst=2, admit_tat=12.5)

    assert store().claim_rate_limits() == {"payments": (Limit("payments", 5.0, 2), 12.5)}

    store().save_claim_clocks({"payments": 99.25, "gone": 1.0})
    assert RateLimit.objects.get(name="payments").admit_tat == 99.25


def test_limit_facts_say_the_targets_limit_the_handler_and_the_turn(tenant, make_job, now):
    limited = _execution(make_job, tenant, now, rate_limit="payments")
    plain = _execution(make_job, tenant, now)
    Execution.objects.filter(pk=plain.pk).update(rate_turn_at=now)

    facts = {f.id: f for f in store().limit_facts([limited.pk, plain.pk])}

    assert facts[limited.pk][1:] == ("payments", "noop", None, "", None)
    assert facts[plain.pk][1:] == (None, "noop", None, "", now)


def test_give_turns_makes_pending_executions_due_at_their_turns_and_queue_uses_them(tenant, make_job, now):
    first, second, queued = (_execution(make_job, tenant, now) for _ in range(3))
    store().queue([queued.pk], now=now, republish_at=now + LEASE)
    turns = {first.pk: now + timedelta(seconds=1), second.pk: now + timedelta(seconds=2), queued.pk: now}

    assert store().give_turns(turns) == 2

    rows = dict(Execution.objects.values_list("pk", "available_at"))
    assert rows[first.pk] == now + timedelta(seconds=1) and rows[second.pk] == now + timedelta(seconds=2)
    assert Execution.objects.get(pk=queued.pk).rate_turn_at is None
    store().queue([first.pk], now=now, republish_at=now + LEASE)
    assert Execution.objects.get(pk=first.pk).rate_turn_at is None  # used
    assert Execution.objects.get(pk=second.pk).rate_turn_at == now + timedelta(seconds=2)


def test_turns_due_are_the_pools_executions_whose_turns_have_come_earliest_first(tenant, make_job, now):
    late, early, ahead, other_pool, paused = (_execution(make_job, tenant, now) for _ in range(5))
    store().give_turns(
        {
            late.pk: now - timedelta(seconds=1),
            early.pk: now - timedelta(seconds=2),
            ahead.pk: now + timedelta(seconds=1),
            other_pool.pk: now,
            paused.pk: now,
        }
    )
    Execution.objects.filter(pk=other_pool.pk).update(pool="etl")
    Job.objects.filter(pk=paused.job_id).update(state="PAUSED")

    rows = store().turns_due(pool="default", now=now, limit=10)

    assert rows == [(early.pk, False, tenant.pk, early.priority), (late.pk, False, tenant.pk, late.priority)]
    assert store().turns_due(pool="default", now=now, limit=1) == rows[:1]
    assert store().turns_due(pool="default", now=now, limit=0) == []


def test_take_start_counts_a_conforming_start_and_says_when_the_next_conforms():
    RateLimit.objects.create(name="payments", per_second=4, burst=2)

    assert store().take_start("payments", 100.0) is None
    assert store().take_start("payments", 100.0) is None  # the burst's second
    assert store().take_start("payments", 100.0) == pytest.approx(100.25)
    assert store().take_start("payments", 100.25) is None
    assert RateLimit.objects.get(name="payments").start_tat == pytest.approx(100.75)
    assert store().take_start("gone", 100.0) is None  # no such limit: nothing holds it


def test_the_history_partitions_are_made_ahead_once_and_dropped_past_their_day():
    """Where the history is partitioned (PostgreSQL), a day's partition is made once and dropped
    once its day is past, with nothing to keep; a plain history has none to make or drop."""
    now = timezone.now() + timedelta(days=3 * 365)  # days no partition covers yet
    made = store().history_partitions_ahead(now=now, days=1)
    again = store().history_partitions_ahead(now=now, days=1)
    dropped, kept, deleted = store().history_partitions_drop(before=now + timedelta(days=3), limit=10)

    if store().history_partitioned:
        assert (made, again) == (2, 0) and dropped >= 2  # with the migration's, of today's dates
    else:
        assert (made, again, dropped) == (0, 0, 0)
    assert (kept, deleted) == (0, 0)
    assert store().history_partitions_ahead(now=now, days=0) == (1 if store().history_partitioned else 0)


# --- the suite itself ---------------------------------------------------------------------------------------


def test_every_operation_is_covered():
    """Each of the interface's operations is called somewhere in this suite (its two files)."""
    suite = [Path(__file__), Path(__file__).with_name("test_conformance_reads.py")]
    called = {
        node.func.attr
        for path in suite
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }

    assert sorted(Store.__abstractmethods__ - called) == []
