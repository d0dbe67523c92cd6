"""The `celery` handler against a Celery app that Tickwork does not own: a module written by the
test, run by its own worker process (outside Tickwork's code and settings), with RabbitMQ as its
broker and Redis as its result backend (README, "Existing Celery tasks")."""

import json
import os
import signal

import pytest
from django.utils import timezone

from executions.models import Execution
from testing import legacy_celery
from testing.harness import history, wait_for

pytestmark = pytest.mark.e2e

AMQP = legacy_celery.AMQP
Legacy = legacy_celery.Legacy


@pytest.fixture
def bridged(live, settings, tmp_path):
    """Tickwork's roles with a bridge "legacy" (and "nowait", with no result backend) to the
    foreign app, whose worker runs beside them."""
    backend = f"redis://127.0.0.1:6379/{int(os.environ.get('TICKWORK_TEST_REDIS_DB', '3'))}"
    bridges = {"legacy": {"broker": AMQP, "resultBackend": backend}, "nowait": {"broker": AMQP}}
    settings.TICKWORK_CELERY_BRIDGES = bridges
    live.base_env["TICKWORK_CELERY_BRIDGES"] = json.dumps(bridges)
    legacy = Legacy(tmp_path, backend)
    try:
        yield legacy
    finally:
        legacy.stop()
        if legacy.process.returncode not in (0, -15, None):
            print(legacy.log.read_text()[-3000:])


def _job(api, legacy, task: str, *, retry: dict | None = None, **payload) -> str:
    body = {
        "name": task,
        "type": "ONCE",
        "runAt": timezone.now().isoformat(),
        "target": {"handler": "celery"},
        "payload": {"bridge": "legacy", "task": task, "queue": legacy.queue, **payload},
        "retryPolicy": retry or {"maxAttempts": 1},
    }
    response = api.post("/v1/jobs", body, format="json")
    assert response.status_code == 201, response.json()
    return str(Execution.objects.get(job_id=response.json()["jobId"]).pk)


def _settled(execution_id: str, *states: str, timeout: float = 40) -> Execution:
    return wait_for(
        lambda: Execution.objects.filter(pk=execution_id, state__in=states).first(),
        timeout=timeout,
        what=f"{execution_id} to reach {states}",
    )


def _checkpoint(execution_id: str) -> dict | None:
    return Execution.objects.filter(pk=execution_id).values_list("checkpoint", flat=True).first()


def test_tasks_reach_the_foreign_app_and_their_outcomes_come_back(api, live, bridged):
    """Sent as given (args, kwargs, queue; the execution's id in the task id and a header);
    without `wait` the run succeeds once the broker has the message, with `wait` the task's
    return value is the result, its exception fails the attempt (and the retry sends anew), and
    a task slower than `waitTimeoutSec` times the attempt out."""
    live.worker()
    live.dispatcher()
    live.sweeper()
    live.ready()
    sent = _job(api, bridged, "billing.tasks.charge", args=["c-42", 1999], kwargs={"currency": "USD"})
    waited = _job(api, bridged, "billing.tasks.charge", args=["c-43", 500], wait=True)
    declined = _job(
        api, bridged, "billing.tasks.decline", args=["c-7"], wait=True, retry={"maxAttempts": 2, "initialDelayMs": 100}
    )
    slow = _job(api, bridged, "billing.tasks.slow", args=[5], wait=True, waitTimeoutSec=1)

    done = _settled(sent, "SUCCEEDED")
    assert done.result == {"taskId": f"tickwork-{sent}-1", "bridge": "legacy", "task": "billing.tasks.charge"}
    assert _settled(waited, "SUCCEEDED").result == {"charged": 500, "customer": "c-43", "currency": "EUR"}

    dead = _settled(declined, "DEAD")
    assert dead.attempt == 2 and dead.error == "ValueError: card declined for customer c-7"
    assert ("RUNNING", "FAILED") in history(declined) and ("FAILED", "PENDING") in history(declined)

    timed_out = _settled(slow, "DEAD")
    assert ("RUNNING", "TIMED_OUT") in history(slow)
    assert "gave no result within 1 s" in timed_out.error

    received = wait_for(lambda: len(bridged.received()) >= 5 and bridged.received(), timeout=20, what="5 tasks")
    by_id = {line["taskId"]: line for line in received}
    assert by_id[f"tickwork-{sent}-1"] == {
        "taskId": f"tickwork-{sent}-1",
        "name": "billing.tasks.charge",
        "args": ["c-42", 1999],
        "kwargs": {"currency": "USD"},
        "queue": bridged.queue,
        "executionId": sent,
        "attempt": 1,
    }
    # The declined task was sent once per attempt, each with its own task id.
    assert {f"tickwork-{declined}-1", f"tickwork-{declined}-2"} <= by_id.keys()
    assert len(received) == 5, received


def test_a_worker_killed_while_waiting_loses_nothing_and_sends_nothing_twice(api, live, bridged):
    """SIGKILL to Tickwork's worker while its run waits for a slow task: the sweeper reclaims the
    lease, the retry (on another worker) finds the sent task in the checkpoint and waits on it,
    and the task's result becomes the run's. The foreign app received the task once."""
    first = live.worker(concurrency=1, wait=False)
    live.dispatcher()
    live.sweeper()
    live.ready()
    execution_id = _job(api, bridged, "billing.tasks.slow", args=[6], wait=True, retry={"maxAttempts": 3})
    wait_for(lambda: bridged.received(), timeout=30, what="the slow task to reach the foreign worker")
    # Waiting starts once the checkpoint names the sent task; a kill before that write (the send
    # has returned, the write has not) is the at-least-once window the module's docstring names.
    wait_for(
        lambda: (_checkpoint(execution_id) or {}).get("state") == "SENT",
        timeout=30,
        what="the sent task to be in the checkpoint",
    )
    first.signal(signal.SIGKILL)
    wait_for(lambda: not first.members(), timeout=5, what="the killed worker to be gone")
    live.worker(concurrency=1)

    done = _settled(execution_id, "SUCCEEDED", timeout=60)
    assert done.attempt == 2 and done.result == {"slept": 6}
    assert ("RUNNING", "FAILED_WORKER_LOST") in history(execution_id)
    assert [line["taskId"] for line in bridged.received()] == [f"tickwork-{execution_id}-1"]
