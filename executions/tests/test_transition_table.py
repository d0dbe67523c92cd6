"""The transition table (executions/states.py) against the named transitions that write it: every
move the table allows is made by a named transition and works; every named transition refuses
an execution in any state it does not accept, writing nothing. On both stores."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import buffering, steps, transitions
from executions.models import Execution, Run
from executions.states import TRANSITIONS, InvalidTransition
from executions.states import ExecutionState as S
from store import Success
from testing import harness

LEASE = timedelta(seconds=30)


def test_every_move_of_the_table_is_made_by_a_named_transition_and_none_other():
    declared = {(source, target) for sources, target in transitions.NAMED.values() for source in sources}
    allowed = {(source, target) for source, targets in TRANSITIONS.items() for target in targets}

    assert declared == allowed


def test_a_named_transition_outside_the_table_fails_when_it_is_declared():
    with pytest.raises(InvalidTransition):
        transitions.moves([S.SUCCEEDED], S.PENDING)


# --- putting an execution in each state, through the transitions themselves -----------------------


def _token(execution) -> int:
    return Execution.objects.get(pk=execution.pk).lease_token


def _queued(execution, now):
    assert transitions.queue_many([execution.pk], now=now, publish_grace=LEASE)


def _running(execution, now):
    _queued(execution, now)
    assert transitions.start(
        execution_id=execution.pk, lease_token=_token(execution), now=now, worker_id="w", lease=LEASE
    )


def _failed_as(state):
    def put(execution, now):
        _running(execution, now)
        token = _token(execution)
        if state == S.FAILED:
            assert transitions.fail(execution_id=execution.pk, lease_token=token, now=now, error="boom", traceback="")
        elif state == S.TIMED_OUT:
            assert transitions.time_out(execution_id=execution.pk, lease_token=token, now=now, error="late")
        else:
            assert [m.id for m in transitions.rescue_many(now=now + 2 * LEASE, limit=10)] == [execution.pk]

    return put


def _dead(execution, now):
    _failed_as(S.FAILED)(execution, now)
    assert transitions.discard(execution_id=execution.pk, source=S.FAILED, now=now, message="exhausted")


def _discarded(execution, now):
    _dead(execution, now)
    assert _moved_one(transitions.discard_dead_many([execution.pk], now=now, reason="discarded"), execution)


def _succeeded(execution, now):
    _running(execution, now)
    assert transitions.succeed(execution_id=execution.pk, lease_token=_token(execution), now=now, result=None)


def _cancelled(execution, now):
    assert transitions.cancel(execution_id=execution.pk, now=now, reason="cancelled")


def _blocked(execution, now):
    _cancelled(execution, now)
    assert steps.reblock(run_id=execution.run_id, names=[execution.step], now=now, reason="again")


PUT_IN = {
    S.BLOCKED: _blocked,
    S.PENDING: lambda execution, now: None,
    S.QUEUED: _queued,
    S.RUNNING: _running,
    S.SUCCEEDED: _succeeded,
    S.FAILED: _failed_as(S.FAILED),
    S.TIMED_OUT: _failed_as(S.TIMED_OUT),
    S.FAILED_WORKER_LOST: _failed_as(S.FAILED_WORKER_LOST),
    S.CANCELLED: _cancelled,
    S.DEAD: _dead,
    S.DISCARDED: _discarded,
}


# --- each named transition, applied to one execution --------------------------------------------


def _moved_one(moved, execution) -> bool:
    return [m.id for m in moved] == [execution.pk]


def _apply(name: str, execution, now) -> bool:
    """Apply the named transition `name` to `execution` (as its caller would: its lease token, its
    state as the source where the transition takes one). Whether it moved; False when refused."""
    row = Execution.objects.get(pk=execution.pk)
    token, state, later = row.lease_token, S(row.state), now + 2 * LEASE
    success = Success(execution.pk, token, {"n": 1}, now)
    calls = {
        "queue_many": lambda: _moved_one(
            transitions.queue_many([execution.pk], now=now, publish_grace=LEASE), execution
        ),
        "skip": lambda: transitions.skip(execution=row, now=now, reason="skipped"),
        "start": lambda: bool(
            transitions.start(execution_id=execution.pk, lease_token=token, now=now, worker_id="w", lease=LEASE)
        ),
        "succeed": lambda: transitions.succeed(execution_id=execution.pk, lease_token=token, now=now, result=None),
        "succeed_without_result": lambda: transitions.succeed_without_result(success=success, why="unstorable"),
        "succeed_many": lambda: transitions.succeed_many([success], now=now) == {str(execution.pk)},
        "fail": lambda: transitions.fail(
            execution_id=execution.pk, lease_token=token, now=now, error="e", traceback=""
        ),
        "time_out": lambda: transitions.time_out(execution_id=execution.pk, lease_token=token, now=now, error="late"),
        "cancel_running": lambda: transitions.cancel_running(
            execution_id=execution.pk, lease_token=token, now=now, reason="stopped"
        ),
        "release": lambda: transitions.release(execution_id=execution.pk, lease_token=token, now=now, reason="bye"),
        "retry": lambda: transitions.retry(
            execution_id=execution.pk, source=state, now=now, available_at=now, message="retry"
        ),
        "discard": lambda: transitions.discard(execution_id=execution.pk, source=state, now=now, message="dead"),
        "cancel": lambda: transitions.cancel(execution_id=execution.pk, now=now, reason="cancelled"),
        "discard_dead_many": lambda: _moved_one(
            transitions.discard_dead_many([execution.pk], now=now, reason="discarded"), execution
        ),
        "redrive": lambda: transitions.redrive(execution_id=execution.pk, source=state, now=now, reason="again"),
        "rescue_many": lambda: _moved_one(transitions.rescue_many(now=later, limit=10), execution),
        "time_out_many": lambda: _moved_one(
            transitions.time_out_many(now=later, before=now + timedelta(days=400), limit=10), execution
        ),
        "force_cancel_many": lambda: _force_cancel(execution, now, later),
        "release_steps": lambda: _moved_one(
            steps.release_steps(run_id=row.run_id, names=[row.step], now=now), execution
        ),
        "cancel_blocked": lambda: _moved_one(
            steps.cancel_blocked(run_id=row.run_id, names=[row.step], now=now, reason="upstream"), execution
        ),
        "buffer": lambda: buffering.buffer(execution_id=execution.pk, source=state, now=now, reason="waits"),
        "unbuffer": lambda: buffering.unbuffer(execution_id=execution.pk, now=now, reason="ended"),
        "reblock": lambda: _moved_one(
            steps.reblock(run_id=row.run_id, names=[row.step], now=now, reason="again"), execution
        ),
    }
    assert calls.keys() == transitions.NAMED.keys(), "a named transition this test does not apply"
    try:
        return bool(calls[name]())
    except InvalidTransition:
        return False


def _as_a_step(execution, now):
    """The execution as the one step of a run: the step transitions act on a run's steps."""
    job = execution.job
    step = {"name": "only", "target": {"pool": job.pool, "handler": job.handler}, "payload": {}, "depends_on": []}
    run = Run.objects.create(
        job=job, tenant=job.tenant, scheduled_for=execution.scheduled_for, steps=[step], created_at=now
    )
    Execution.objects.filter(pk=execution.pk).update(run=run, step="only")
    return Execution.objects.get(pk=execution.pk)


def _force_cancel(execution, now, later) -> bool:
    transitions.request_cancel(execution_id=execution.pk, now=now, reason="asked")  # RUNNING only; else nothing
    return _moved_one(transitions.force_cancel_many(now=later, requested_before=later, limit=10), execution)


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(transitions.NAMED))
def test_each_named_transition_moves_exactly_the_states_it_accepts(name, tenant, make_job):
    sources, target = transitions.NAMED[name]
    now = timezone.now()
    for state, put_in in PUT_IN.items():
        job = make_job(tenant, run_at=now - timedelta(seconds=1))
        execution = _as_a_step(job.executions.get(), now)
        put_in(execution, now)
        assert Execution.objects.get(pk=execution.pk).state == state
        events = len(harness.events(execution.pk))

        moved = _apply(name, execution, now)

        row = Execution.objects.get(pk=execution.pk)
        if state in sources:
            assert moved, f"{name} did not move {state} → {target}"
            assert row.state == target
            assert harness.events(execution.pk)[-1].to_state == target
        else:
            assert not moved, f"{name} moved {state}, which it does not accept"
            assert row.state == state
            assert len(harness.events(execution.pk)) == events
        job.delete()
