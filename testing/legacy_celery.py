"""A Celery app that Tickwork does not own, for the tests of the `celery` handler and of
import_beat: its own module (written to a folder of the test's), its own worker process outside
Tickwork's code and settings, RabbitMQ as its broker and Redis as its result backend. Each task
writes a line saying what it received, so a test sees the message as the consumer saw it."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from testing.harness import wait_for

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

    @app.task(bind=True, name="reports.tasks.nightly")
    def nightly(self, *args, **kwargs):
        record(self)
        return {"report": list(args), **kwargs}

    @app.task(bind=True, name="monitoring.tasks.poll")
    def poll(self):
        record(self)
        return "ok"

    @app.task(bind=True, name="billing.tasks.slow")
    def slow(self, seconds):
        record(self)
        time.sleep(seconds)
        return {"slept": seconds}
    """
)


class Legacy:
    """The foreign app's worker, consuming one queue of the test's own (`queue`)."""

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
                # A node name of its own: its remote-control queue on RabbitMQ is exclusive to one
                # connection, and "celery@<host>" was shared by every legacy worker (the import
                # test's on another xdist worker, or the last test's still closing): the second
                # failed with RESOURCE_LOCKED.
                [sys.executable, "-m", "celery", "-A", "legacy_billing", "worker", "-Q", self.queue, "-c", "2",
                 "-n", f"{self.queue}@%h", "--without-mingle", "--without-gossip", "-l", "INFO"],
                cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        # Ready, or gone: a worker that exited (or never got ready) fails the test with its log,
        # which the fixture's teardown would not print (CI saw one time out once, with no trace).
        try:
            wait_for(
                lambda: " ready." in self.log.read_text() or self.process.poll() is not None,
                timeout=60,
                what="the legacy worker to be ready",
            )
        except AssertionError as timed_out:
            self.stop()
            raise AssertionError(f"{timed_out}; its log:\n{self.log.read_text()[-3000:]}") from None
        if " ready." not in self.log.read_text():
            raise AssertionError(
                f"the legacy worker exited ({self.process.returncode}); its log:\n{self.log.read_text()[-3000:]}"
            )

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
