"""The `celery` handler against a Celery app that Tickwork does not own: a module written by the
test, run by its own worker process (outside Tickwork's code and settings), with RabbitMQ as its
broker and Redis as its result backend (README, "Existing Celery tasks")."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from django.utils import timezone

from executions.models import Execution
from testing.harness import history, wait_for

pytestmark = pytest.mark.e2e

AMQP = os.environ.get("TICKWORK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")

# The team's existing Celery app: it knows nothing of Tickwork. Each task writes a line saying
# what it received, so the test sees the message as the consumer saw it.
LEGACY_APP = textwrap.dedent(
    """
    import json, os, time
    from celery import Celery

    app = Celery("legacy", broker=os.environ["LEGACY_BROKER"], backend=os.environ["LEGACY_BACKEND"])
    app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])

    def record(task):
        line = {
            "taskId": task.request.id,
            "name": task.name,
            "args": list(task.request.args or []),
            "kwargs": dict(task.request.kwargs or {}),
            "queue": (task.request.delivery_info or {}).get("routing_key"),
            "executionId": getattr(task.request, "tickwork_execution_id", None),
            "attempt": getattr(task.request, "tickwork_attempt", None),
        }
        with open(os.environ["LEGACY_RECORD"], "a") as out:
            out.write(json.dumps(line) + "\\n")

    @app.task(bind=True, name="billing.tasks.charge")
    def charge(self, customer, amount, currency="EUR"):
        record(self)
        return {"charged": amount, "customer": customer, "currency": currency}

    @app.task(bind=True, name="billing.tasks.decline")
    def decline(self, customer):
        record(self)
        raise ValueError(f"card declined for customer {customer}")

    @app.task(bind=True, name="billing.tasks.slow")
    def slow(self, seconds):
        record(self)
        time.sleep(seconds)
        return {"slept": seconds}
    """
)


class Legacy:
    """The foreign app's worker, consuming one queue of the test's own."""

    def __init__(self, tmp_path: Path, backend: str) -> None:
        self.queue = f"billing-{uuid.uuid4().hex[:8]}"
        self.record = tmp_path / "legacy-record.jsonl"
        self.log = tmp_path / "legacy-worker.log"
        home = tmp_path / "legacy"
        home.mkdir()
        (home / "legacy_billing.py").write_text(LEGACY_APP)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "TICKWORK_", "CELERY_"))}
        env.update(
            PYTHONPATH=str(home),
            LEGACY_BROKER=AMQP,
            LEGACY_BACKEND=backend,
            LEGACY_RECORD=str(self.record),
            PYTHONUNBUFFERED="1",
        )
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "legacy_billing", "worker", "-Q", self.queue, "-c", "2",
                 "--without-mingle", "--without-gossip", "-l", "INFO"],
                cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        wait_for(lambda: " ready." in self.log.read_text(), timeout=60, what="the legacy worker to be ready")

    def received(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        from kombu import Connection

        with Connection(AMQP) as connection:
            connection.default_channel.queue_delete(self.queue)


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
    _settled(execution_id, "RUNNING")
    first.signal(signal.SIGKILL)
    wait_for(lambda: not first.members(), timeout=5, what="the killed worker to be gone")
    live.worker(concurrency=1)

    done = _settled(execution_id, "SUCCEEDED", timeout=60)
    assert done.attempt == 2 and done.result == {"slept": 6}
    assert ("RUNNING", "FAILED_WORKER_LOST") in history(execution_id)
    assert [line["taskId"] for line in bridged.received()] == [f"tickwork-{execution_id}-1"]
