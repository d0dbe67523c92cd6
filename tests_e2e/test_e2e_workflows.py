"""Workflows end to end, through real processes (dispatcher, sweeper, Celery prefork workers):
a diamond runs its last step once, after both of its upstream steps, with their results; a dead
step cancels what depends on it and nothing else, and its re-drive runs the rest; a worker and a
dispatcher killed during a run lose and double nothing."""

import itertools
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution, ExecutionEvent, Run
from readmodels.runs import run_state
from scheduling.execution_changes import execution_redrive
from testing import harness
from testing.harness import wait_for

pytestmark = pytest.mark.e2e


def _step(name, *depends, handler="test-upstream", **extra):
    return {
        "name": name,
        "target": {"pool": "default", "handler": handler},
        "payload": {},
        "depends_on": list(depends),
        **extra,
    }


def _run_of(make_job, tenant, steps, **fields):
    job = make_job(tenant, run_at=timezone.now(), workflow={"steps": steps}, pool="", handler="", **fields)
    return job, Run.objects.get(job=job)


def _steps(run) -> dict[str, Execution]:
    return {e.step: e for e in Execution.objects.filter(run=run)}


def _all_ended(run):
    steps = _steps(run)
    return steps if all(e.state in ("SUCCEEDED", "DEAD", "CANCELLED") for e in steps.values()) else None


def _count(execution, source, target) -> int:
    return harness.history(execution.pk).count((source, target))


def test_a_diamond_runs_its_last_step_once_after_both_branches_with_their_results(live, tenant, make_job):
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    job, run = _run_of(make_job, tenant, [_step("a"), _step("b", "a"), _step("c", "a"), _step("d", "b", "c")])

    steps = wait_for(lambda: _all_ended(run), timeout=30, what="the run to end")

    assert {name: e.state for name, e in steps.items()} == dict.fromkeys("abcd", "SUCCEEDED")
    b, c, d = steps["b"], steps["c"], steps["d"]
    assert d.started_at >= max(b.finished_at, c.finished_at)
    assert d.result["upstream"] == {"b": b.result, "c": c.result}
    assert b.result["upstream"] == {"a": steps["a"].result}
    for execution in steps.values():
        assert _count(execution, "RUNNING", "SUCCEEDED") == 1
    assert _count(d, "BLOCKED", "PENDING") == 1
    assert run_state((e.state, e.attempt) for e in steps.values()) == "SUCCEEDED"
    job.refresh_from_db()
    assert job.standing == "COMPLETED"


def test_a_dead_step_cancels_its_downstream_step_not_its_sibling_and_its_redrive_runs_it(live, tenant, make_job):
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    once = {"max_attempts": 1, "backoff": "FIXED", "initial_delay_ms": 0, "max_delay_ms": 0, "jitter": False}
    failing = _step("b", "a", handler="fail", retry_policy=once)
    failing["payload"] = {"failTimes": 1}  # fails its first attempt only: the re-drive succeeds
    _job, run = _run_of(make_job, tenant, [_step("a"), failing, _step("c", "a"), _step("d", "b", "c")])

    steps = wait_for(lambda: _all_ended(run), timeout=30, what="the run to end")

    assert {name: e.state for name, e in steps.items()} == {
        "a": "SUCCEEDED",
        "b": "DEAD",
        "c": "SUCCEEDED",
        "d": "CANCELLED",
    }
    assert ExecutionEvent.objects.filter(execution=steps["d"]).latest("id").message == "upstream step 'b' ended DEAD"
    assert steps["d"].started_at is None

    execution_redrive(execution=steps["b"], now=timezone.now())
    wait_for(lambda: Execution.objects.get(pk=steps["d"].pk).state == "SUCCEEDED", timeout=30, what="d to run")

    steps = _steps(run)
    assert steps["b"].state == "SUCCEEDED" and steps["b"].attempt == 2
    assert steps["d"].result["upstream"]["b"] == {"succeededOnAttempt": 2}
    assert _count(steps["d"], "CANCELLED", "BLOCKED") == 1 and _count(steps["d"], "BLOCKED", "PENDING") == 1
    assert _count(steps["c"], "RUNNING", "SUCCEEDED") == 1  # the sibling ran once, before and only


def test_a_worker_and_a_dispatcher_killed_during_a_run_lose_and_double_nothing(live, tenant, make_job):
    """A chain of five steps (0.4 s, the second 3 s): while the second runs, its worker and the dispatcher are
    SIGKILLed. Another worker and dispatcher take over; the lost step is retried after its lease;
    every step succeeds once, and each is released once."""
    first = live.worker(concurrency=1, wait=False)
    live.worker(concurrency=1, wait=False)
    dispatcher = live.dispatcher()
    live.sweeper()
    live.ready()
    names = ["s1", "s2", "s3", "s4", "s5"]
    chain = [_step(name, *names[i - 1 : i], handler="sleep") for i, name in enumerate(names)]
    for step in chain:
        step["payload"] = {"seconds": 0.4}
    chain[1]["payload"] = {"seconds": 3}  # long enough that the kill lands while it runs, however loaded the host
    _job, run = _run_of(make_job, tenant, chain)
    second = wait_for(
        lambda: Execution.objects.filter(run=run, step="s2", state="RUNNING").first(), timeout=20, what="s2 to run"
    )
    victim = live.worker_of(second.worker_id)

    victim.signal(signal.SIGKILL)
    dispatcher.signal(signal.SIGKILL)
    live.dispatcher()
    if victim is first:
        live.worker(concurrency=1, wait=False)
    steps = wait_for(lambda: _all_ended(run), timeout=60, what="the run to end")

    assert {name: e.state for name, e in steps.items()} == dict.fromkeys(names, "SUCCEEDED")
    for name, execution in steps.items():
        assert _count(execution, "RUNNING", "SUCCEEDED") == 1, name
        assert _count(execution, "BLOCKED", "PENDING") == (0 if name == "s1" else 1), name
    assert steps["s2"].attempt == 2  # its first attempt died with the worker
    for before, after in itertools.pairwise(names):
        assert steps[after].started_at >= steps[before].finished_at


def test_a_cron_workflow_runs_once_per_fire_and_forbid_skips_a_whole_run_while_one_is_going(live, tenant, make_job):
    """A cron workflow (every 5 minutes, RUN_ALL, FORBID) made 12 minutes ago: its missed fires are
    due at once. The first fire's run takes a few seconds (its first step sleeps); the fires
    claimed meanwhile are skipped whole, every step of them CANCELLED and none started; each fire
    has exactly one run, and the first run's steps each run once."""
    made_at = timezone.now() - timedelta(minutes=12)
    steps = [_step("slow", handler="sleep"), _step("after", "slow")]
    steps[0]["payload"] = {"seconds": 3}
    job = make_job(
        tenant,
        type="CRON",
        schedule="*/5 * * * *",
        workflow={"steps": steps},
        pool="",
        handler="",
        misfire_policy="RUN_ALL",
        concurrency_policy="FORBID",
        now=made_at,
    )
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    now = timezone.now()

    def past_runs_ended():
        past = list(Run.objects.filter(job=job, scheduled_for__lte=now))
        return past if len(past) >= 2 and all(_all_ended(run) for run in past) else None

    past = wait_for(past_runs_ended, timeout=40, what="the missed fires' runs to end")

    first, *skipped = sorted(past, key=lambda run: run.scheduled_for)
    assert {e.step: e.state for e in _steps(first).values()} == {"slow": "SUCCEEDED", "after": "SUCCEEDED"}
    for execution in _steps(first).values():
        assert _count(execution, "RUNNING", "SUCCEEDED") == 1
    for run in skipped:
        for execution in _steps(run).values():
            assert execution.state == "CANCELLED" and execution.started_at is None
            assert ExecutionEvent.objects.filter(execution=execution).latest("id").message == (
                "skipped: the previous run is still active (concurrencyPolicy FORBID)"
            )
    fires = list(Run.objects.filter(job=job).values_list("scheduled_for", flat=True))
    assert len(fires) == len(set(fires))  # one run per fire
    assert Execution.objects.filter(job=job, state="RUNNING").count() == 0
