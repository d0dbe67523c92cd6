"""The built-in handler `celery`: a named task sent to a Celery app that Tickwork does not own
(its own broker, its own workers, its own code). README, "Existing Celery tasks".

Bridges are the operator's, never a job's: `TICKWORK_CELERY_BRIDGES` names each with its broker
and, for jobs that wait for the task's result, its result backend. A job names a bridge and a
task; it can never name a broker URL, so a tenant cannot make Tickwork publish anywhere else.

Delivery is at least once, and says so:
- the task id is `tickwork-<execution id>-<attempt>` (`task_id`), and the message's headers carry
  `tickwork_execution_id`, `tickwork_attempt` and `tickwork_job_id`: a consumer that must act once
  keys on the execution id, which every attempt of one run shares;
- without `wait`, the attempt succeeds once the bridge's broker has accepted the message
  (publisher confirms on RabbitMQ); a publish that fails fails the attempt, and its retry policy
  sends again;
- with `wait`, the attempt waits for the task's result in the bridge's result backend, holding
  its lease and heartbeating like any run, and stops at once when cancelled (the task is then
  revoked, best effort). The message sent is kept in the execution's checkpoint, so a retry
  after the worker was lost or the wait timed out waits on the same task instead of sending it
  again; a retry after the task raised sends a new message, with the new attempt's task id.
  A worker lost between the broker's accepting the message and the checkpoint's write leaves
  no checkpoint, and its retry sends again: that moment is why delivery is at least once.
"""

import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from celery import Celery
from celery.app.backends import by_url
from celery.result import AsyncResult
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kombu import Connection, pools
from rest_framework import serializers

from jobs.payloads import StrictSerializer
from worker.context import ExecutionStopped, HandlerContext, HandlerTimedOut

# How often a waiting attempt asks the result backend (and so how late it may notice a result).
POLL_SECONDS = 0.25
MAX_WAIT_SECONDS = 7 * 86400
# A broker that does not answer within this long fails the attempt (its retry policy decides).
CONNECT_TIMEOUT_SECONDS = 10.0
_TASK_NAME = re.compile(r"[A-Za-z_][\w\-]*(\.[A-Za-z_][\w\-]*)*")
_QUEUE_NAME = re.compile(r"[\w.\-:]{1,200}")


@dataclass(frozen=True)
class Bridge:
    name: str
    broker: str
    result_backend: str = ""


def bridges() -> dict[str, Bridge]:
    """The bridges TICKWORK_CELERY_BRIDGES configures, by name."""
    found = {}
    for name, conf in settings.TICKWORK_CELERY_BRIDGES.items():
        if not isinstance(conf, dict) or not isinstance(conf.get("broker"), str) or not conf["broker"]:
            raise ImproperlyConfigured(f'TICKWORK_CELERY_BRIDGES["{name}"] needs a "broker" URL')
        unknown = set(conf) - {"broker", "resultBackend"}
        if unknown:
            raise ImproperlyConfigured(
                f'TICKWORK_CELERY_BRIDGES["{name}"] has unknown keys: {", ".join(sorted(unknown))}'
            )
        found[name] = Bridge(name=name, broker=conf["broker"], result_backend=conf.get("resultBackend") or "")
    return found


@dataclass(frozen=True)
class _Link:
    """A bridge's Celery app, broker connection and result backend, built from its own URLs.
    Celery prefers the environment's CELERY_BROKER_URL and CELERY_RESULT_BACKEND to an app's
    configuration, and a worker's environment names Tickwork's own broker there: so the bridge's
    URLs are passed to each call, never left to the app's configuration."""

    app: Celery
    connection: Connection
    backend: Any


_links: dict[Bridge, _Link] = {}
_links_lock = threading.Lock()


def link_of(bridge: Bridge) -> _Link:
    """One per bridge and process: its connection keys kombu's pools of connections and producers."""
    with _links_lock:
        link = _links.get(bridge)
        if link is None:
            app = Celery(f"tickwork-bridge-{bridge.name}", set_as_current=False)
            app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
            # RabbitMQ acknowledges each message before the send returns: "accepted" means the
            # broker has it, not that it was written to a socket.
            connection = Connection(
                bridge.broker, transport_options={"confirm_publish": True}, connect_timeout=CONNECT_TIMEOUT_SECONDS
            )
            backend = None
            if bridge.result_backend:
                # celery-types declares by_url's answer as the class alone; it is (class, url).
                found: Any = by_url(bridge.result_backend, app.loader)
                backend = found[0](app=app, url=found[1])
            link = _links[bridge] = _Link(app=app, connection=connection, backend=backend)
        return link


def task_id(execution_id: str, attempt: int) -> str:
    return f"tickwork-{execution_id}-{attempt}"


class CeleryPayload(StrictSerializer):
    bridge = serializers.CharField(help_text="A bridge named in TICKWORK_CELERY_BRIDGES.")
    task = serializers.CharField(max_length=200, help_text='The task\'s registered name, e.g. "billing.tasks.charge".')
    args = serializers.ListField(child=serializers.JSONField(allow_null=True), required=False)
    kwargs = serializers.DictField(child=serializers.JSONField(allow_null=True), required=False)
    queue = serializers.CharField(max_length=200, required=False, help_text="Default: the task's own routing.")
    wait = serializers.BooleanField(required=False, help_text="Wait for the task's result (needs a resultBackend).")
    waitTimeoutSec = serializers.FloatField(
        min_value=0.001, max_value=MAX_WAIT_SECONDS, required=False, help_text="Default 300; past it, TIMED_OUT."
    )

    def validate_bridge(self, value: str) -> str:
        known = bridges()
        if value not in known:
            named = ", ".join(sorted(known)) or "none is configured (TICKWORK_CELERY_BRIDGES)"
            raise serializers.ValidationError(f'unknown bridge "{value}"; known: {named}')
        return value

    def validate_task(self, value: str) -> str:
        if not _TASK_NAME.fullmatch(value):
            raise serializers.ValidationError("a task name: dotted identifiers, e.g. billing.tasks.charge")
        return value

    def validate_queue(self, value: str) -> str:
        if not _QUEUE_NAME.fullmatch(value):
            raise serializers.ValidationError("letters, digits and . _ - : only")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("wait") and not bridges()[attrs["bridge"]].result_backend:
            raise serializers.ValidationError(
                {"wait": [f'bridge "{attrs["bridge"]}" has no resultBackend, so its results cannot be waited for']}
            )
        if "waitTimeoutSec" in attrs and not attrs.get("wait"):
            raise serializers.ValidationError({"waitTimeoutSec": ["is only used with wait: true"]})
        return attrs


class TaskRaised(Exception):
    """The bridged task raised; its subclass carries the remote exception's type name."""


def _raised(exc_type: str, message: str) -> TaskRaised:
    """An exception named like the task's, so the execution's error reads "ValueError: …" and the
    dead letter groups it by the remote type."""
    name = exc_type if exc_type.isidentifier() else "TaskRaised"
    return type(name, (TaskRaised,), {"__module__": "celery_bridge"})(message)


def send(ctx: HandlerContext) -> Any:
    """The `celery` handler (worker/handlers.py): sends `task` with `args` and `kwargs` (to
    `queue`) through the operator's bridge; with `wait`, returns the task's result."""
    payload = ctx.payload
    bridge = bridges()[payload["bridge"]]
    link = link_of(bridge)
    wait = bool(payload.get("wait"))
    sent = (ctx.load_checkpoint() or {}) if wait else {}
    if sent.get("state") == "SENT":
        # This attempt follows one that was lost or timed out after its message was accepted:
        # waiting on that task, not sending it again, keeps one run one task.
        current = sent["taskId"]
        ctx.log(f"waiting on task {current}, sent by attempt {sent['attempt']}")
    else:
        current = task_id(ctx.execution_id, ctx.attempt)
        options: dict[str, Any] = {"queue": payload["queue"]} if payload.get("queue") else {}
        with pools.producers[link.connection].acquire(block=True, timeout=CONNECT_TIMEOUT_SECONDS) as producer:
            link.app.send_task(
                payload["task"],
                args=payload.get("args") or [],
                kwargs=payload.get("kwargs") or {},
                task_id=current,
                headers={
                    "tickwork_execution_id": ctx.execution_id,
                    "tickwork_attempt": ctx.attempt,
                    "tickwork_job_id": ctx.job_id,
                },
                producer=producer,
                **options,
            )
        ctx.log(f"sent {payload['task']} as {current} through bridge {bridge.name}")
        if wait:
            ctx.save_checkpoint({"state": "SENT", "taskId": current, "attempt": ctx.attempt})
    if not wait:
        return {"taskId": current, "bridge": bridge.name, "task": payload["task"]}
    return _wait(ctx, link, current, timeout=float(payload.get("waitTimeoutSec", 300)))


def _wait(ctx: HandlerContext, link: _Link, current: str, *, timeout: float) -> Any:
    result: AsyncResult[Any] = AsyncResult(current, app=link.app, backend=link.backend)
    deadline = time.monotonic() + timeout
    try:
        while not result.ready():
            if time.monotonic() >= deadline:
                raise HandlerTimedOut(f"task {current} gave no result within {timeout:g} s")
            ctx.sleep(POLL_SECONDS)  # raises ExecutionStopped at once when the run must stop
    except ExecutionStopped:
        if ctx.reason.startswith("cancelled"):
            link.app.control.revoke(
                current, connection=link.connection
            )  # best effort: a consumer that has not started it skips it
        raise
    if result.successful():
        return result.result
    failure = result.result
    ctx.save_checkpoint({"state": "RAISED", "taskId": current, "attempt": ctx.attempt})
    if isinstance(failure, BaseException):
        raise _raised(type(failure).__name__, str(failure))
    raise _raised("TaskRaised", f"task {current} ended {result.state}")
