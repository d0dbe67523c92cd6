"""The publisher seam: how claimed executions reach the workers' queues.

Celery is a transport, not the source of truth: a message carries only the execution id and
the lease token, goes out after the claim commits, and may be lost or duplicated; the row
decides what runs. `InMemoryPublisher` lets unit tests watch what would have been sent.
"""

import base64
import json
import os
import weakref
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from celery import current_app

from jobs.registry import queue_name

TASK_NAME = "tickwork.run_execution"

# A job's priority (0 HIGH, 1 NORMAL, 2 LOW: the claim's order) as the message priority the
# broker serves it by, so that HIGH also goes first when a pool's backlog is on the broker: the
# claim orders only what is still PENDING. kombu's Redis transport keeps a list per priority step
# (0, 3, 6, 9) and a worker pops the lowest step first; AMQP serves the highest priority first,
# up to the queue's x-max-priority (CELERY_TASK_QUEUE_MAX_PRIORITY).
_LOWEST_FIRST = {0: 0, 1: 3, 2: 6}
_HIGHEST_FIRST = {0: 2, 1: 1, 2: 0}


def broker_priority(priority: int, *, transport: str) -> int:
    """The message priority of a job priority on a broker of `transport` (kombu's driver type)."""
    return (_HIGHEST_FIRST if transport == "amqp" else _LOWEST_FIRST)[priority]


class Dispatch(NamedTuple):
    """One message to publish. A tuple: a claim makes a thousand at a time."""

    execution_id: str
    lease_token: int
    pool: str
    priority: int


class Publisher(Protocol):
    def publish(self, dispatches: Sequence[Dispatch]) -> None: ...


class InMemoryPublisher:
    def __init__(self) -> None:
        self.sent: list[Dispatch] = []

    def publish(self, dispatches: Sequence[Dispatch]) -> None:
        self.sent.extend(dispatches)


class CeleryPublisher:
    """Publishes a batch of `tickwork.run_execution` messages, one per dispatch, in the order given.

    On a Redis broker the batch is written as the messages `apply_async` would write, pushed in one
    pipeline: one round trip per batch. A loop of `apply_async` costs a round trip and the whole of
    Celery's publish machinery per message, which made publishing, not the claim, the dispatcher's
    bottleneck. On other brokers (AMQP, the filesystem transport) every message goes through
    Celery's `send_task`, all on one producer, inside a kombu publish batch where the transport has one.
    """

    def __init__(self, app=None) -> None:
        # The project's app (scheduler_project/celery.py), which Django's start-up makes current.
        self.app = app if app is not None else current_app._get_current_object()  # type: ignore[attr-defined]  # a Proxy
        self._default_format: bool | None = None
        # A Redis client per (pooled, reused) channel: kombu makes a new one for every write,
        # which was a third of a small batch's publishing time.
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def publish(self, dispatches: Sequence[Dispatch]) -> None:
        if not dispatches:
            return
        with self.app.producer_or_acquire() as producer:
            if self._can_pipeline(producer.channel, {queue_name(item.pool) for item in dispatches}):
                self._publish_redis(producer.channel, dispatches)
            else:
                self._publish_each(producer, dispatches)

    def _publish_each(self, producer, dispatches: Sequence[Dispatch]) -> None:
        transport = producer.connection.transport.driver_type
        # kombu's publish batch pipelines where the transport can and publishes at once where not.
        with producer.batch():
            for item in dispatches:
                queue = queue_name(item.pool)
                self.app.send_task(
                    TASK_NAME,
                    args=(item.execution_id, item.lease_token),
                    queue=queue,
                    routing_key=queue,
                    producer=producer,
                    ignore_result=True,
                    priority=broker_priority(item.priority, transport=transport),
                )

    def _can_pipeline(self, channel, queues: set[str]) -> bool:
        """Whether a message written here is exactly what `send_task` would have written: a Redis
        channel, Celery's default message format, nothing that hooks into `send_task`, and no
        queue declared with an expiry (kombu refreshes that on every publish)."""
        from celery import signals

        try:
            from kombu.transport.redis import Channel as RedisChannel
        except ImportError:  # the redis client is not installed: no Redis broker either
            return False
        if self._default_format is None:  # the app's configuration does not change once it runs
            conf = self.app.conf
            self._default_format = (
                conf.task_protocol == 2
                and conf.task_serializer == "json"
                and not conf.task_compression
                and not conf.task_default_priority
                and not conf.task_send_sent_event
            )
        return (
            self._default_format
            and isinstance(channel, RedisChannel)
            and not signals.before_task_publish.receivers
            and not signals.after_task_publish.receivers
            and not queues & set(channel._expires)  # type: ignore[attr-defined]  # kombu's, not in the stubs
        )

    def _publish_redis(self, channel, dispatches: Sequence[Dispatch]) -> None:
        envelope = RedisEnvelope(TASK_NAME, origin=_origin(), reply_to=self.app.thread_oid)
        targets = [(queue_name(item.pool), broker_priority(item.priority, transport="redis")) for item in dispatches]
        messages = envelope.render_runs(
            [(item.execution_id, item.lease_token, *target) for item, target in zip(dispatches, targets, strict=True)]
        )
        by_key: dict[str, list[str]] = defaultdict(list)
        for (queue, priority), message in zip(targets, messages, strict=True):
            # The list of the queue's priority step that the message lives in, named as kombu names it.
            by_key[channel._q_for_pri(queue, priority)].append(message)
        client = self._clients.get(channel)
        if client is None:
            with channel.conn_or_acquire() as client:  # the client kombu itself would write with
                self._clients[channel] = client
        pipe = client.pipeline(transaction=False)
        for key, messages in by_key.items():
            # LPUSH a b c leaves c at the head; consumers pop from the tail: a is delivered
            # first, as it would be after three single LPUSHes.
            for start in range(0, len(messages), 1000):
                pipe.lpush(key, *messages[start : start + 1000])
        pipe.execute()


class RedisEnvelope:
    """A Celery protocol 2 message for a task called with positional arguments and no result, as
    kombu's Redis transport stores it: the JSON of body (base64 of the JSON [args, kwargs, embed]),
    content-type, content-encoding, headers (celery.app.amqp.as_task_v2) and properties (with the
    delivery_info, delivery_tag and body_encoding that kombu.transport.virtual.Channel.basic_publish
    adds).

    All but the ids, the arguments and the queue is the same for every message, so the JSON is
    rendered once into a template whose slots each message fills in.
    """

    def __init__(self, task: str, *, origin: str, reply_to: str) -> None:
        slot = {name: f"\x00{name}\x00" for name in ("id", "argsrepr", "queue", "body", "tag", "priority")}
        message = {
            "body": slot["body"],
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {
                "lang": "py",
                "task": task,
                "id": slot["id"],
                "shadow": None,
                "eta": None,
                "expires": None,
                "group": None,
                "group_index": None,
                "retries": 0,
                "timelimit": [None, None],
                "root_id": slot["id"],
                "parent_id": None,
                "argsrepr": slot["argsrepr"],
                "kwargsrepr": "{}",
                "origin": origin,
                "ignore_result": True,
                "replaced_task_nesting": 0,
                "stamped_headers": None,
                "stamps": {},
            },
            "properties": {
                "correlation_id": slot["id"],
                "reply_to": reply_to,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": slot["queue"]},
                "priority": slot["priority"],
                "body_encoding": "base64",
                "delivery_tag": slot["tag"],
            },
        }
        template = json.dumps(message).replace("%", "%%")
        for name, marker in slot.items():
            template = template.replace(json.dumps(marker), f"%({name})s")
        self.template = template

    def render(self, args: tuple, queue: str, priority: int = 0) -> str:
        """The message for a call with `args`, with a new task id and delivery tag."""
        return self._render([(json.dumps(args), json.dumps(repr(args)), queue, priority)])[0]

    def render_runs(self, runs: Sequence[tuple[str, int, str, int]]) -> list[str]:
        """The messages for `tickwork.run_execution`'s (execution id, lease token), each with its
        queue and priority, in order. The arguments are written without json.dumps, which was a
        third of a batch's rendering: an id is a UUID's text and a token an int, and neither needs
        escaping, in JSON or in repr."""
        return self._render([(f'["{eid}", {token:d}]', f"\"('{eid}', {token:d})\"", q, p) for eid, token, q, p in runs])

    def _render(self, messages: Sequence[tuple[str, str, str, int]]) -> list[str]:
        """The messages for (the arguments' JSON, the JSON of their repr, queue, priority)."""
        ids = _uuid4s(2 * len(messages))
        queues: dict[str, str] = {}
        rendered = []
        for i, (args_json, argsrepr_json, queue, priority) in enumerate(messages):
            if queue not in queues:
                queues[queue] = json.dumps(queue)
            body = f"[{args_json}, {{}}, {_EMBED}]".encode()
            # Ids and base64 need no JSON escaping; the rest was escaped by the caller.
            rendered.append(
                self.template
                % {
                    "id": f'"{ids[2 * i]}"',
                    "argsrepr": argsrepr_json,
                    "queue": queues[queue],
                    "body": f'"{base64.b64encode(body).decode()}"',
                    "tag": f'"{ids[2 * i + 1]}"',
                    "priority": int(priority),
                }
            )
        return rendered


# The third element of a protocol 2 body: no callbacks, errbacks, chain or chord.
_EMBED = json.dumps({"callbacks": None, "errbacks": None, "chain": None, "chord": None})


def _uuid4s(count: int) -> list[str]:
    """`count` random (version 4) UUIDs, as uuid.uuid4() makes them, from one read of the OS's
    random source: a uuid4() per id was a third of the time it took to render a batch."""
    raw = bytearray(os.urandom(16 * count))
    raw[6::16] = bytes(b & 0x0F | 0x40 for b in raw[6::16])  # version 4
    raw[8::16] = bytes(b & 0x3F | 0x80 for b in raw[8::16])  # RFC 4122 variant
    h = raw.hex()
    return [f"{h[i : i + 8]}-{h[i + 8 : i + 12]}-{h[i + 12 : i + 16]}-{h[i + 16 : i + 20]}-{h[i + 20 : i + 32]}"
            for i in range(0, 32 * count, 32)]  # fmt: skip


def _origin() -> str:
    from celery.utils.nodenames import anon_nodename

    return anon_nodename()
