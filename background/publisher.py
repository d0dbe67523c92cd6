"""The publisher seam: how claimed executions reach the workers' queues.

Celery is a transport, not the source of truth: a message carries only execution ids and their
lease tokens, goes out after the claim commits, and may be lost or duplicated; the row decides
what runs. `InMemoryPublisher` lets unit tests watch what would have been sent.

A message carries one run (`tickwork.run_execution`) or, when a publish holds more of a pool's
runs than the pool has slots, a batch of them (`tickwork.run_executions`, worker/batches.py): a
slot runs a batch's runs one after another, each started under its own lease token. Celery's
path through a worker costs ~0.8 ms of CPU per message whatever it carries, which was a third of
a short run's cost.
"""

import base64
import json
import logging
import math
import os
import time
import weakref
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from celery import current_app
from django.conf import settings

from jobs.registry import queue_name

logger = logging.getLogger(__name__)
TASK_NAME = "tickwork.run_execution"
BATCH_TASK_NAME = "tickwork.run_executions"
# How long the publisher trusts its reading of the pools' live slots (the workers report every 2 s).
SLOTS_SECONDS = 2.0

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


def batches(dispatches: Sequence[Dispatch], *, slots: dict[str, int], most: int) -> list[list[Dispatch]]:
    """The messages to publish `dispatches` in: each one run, or several runs of one pool and one
    priority that follow each other in the order given (the claim's: priority, then fair share),
    so that the broker serves them in that order still.

    A pool's runs are spread over its live `slots`: a publish of n runs of a pool with s slots
    makes messages of ceil(n / s) runs, at most `most`, so that every slot gets a message of the
    publish and a batch never takes work from an idle slot. A pool whose slots are unknown (no
    live worker reported them) gets a message per run."""
    count: dict[str, int] = defaultdict(int)
    for item in dispatches:
        count[item.pool] += 1
    size = {pool: max(1, min(most, math.ceil(n / slots[pool]) if slots.get(pool) else 1)) for pool, n in count.items()}
    messages: list[list[Dispatch]] = []
    open_: dict[tuple[str, int], list[Dispatch]] = {}
    for item in dispatches:
        key = (item.pool, item.priority)
        current = open_.get(key)
        if current is None or len(current) >= size[item.pool]:
            current = open_[key] = []
            messages.append(current)
        current.append(item)
    return messages


class LiveSlots:
    """The live slots of each pool (pools/registry.py), read again at most every SLOTS_SECONDS:
    a statement per publish would cost the dispatcher more than its batches save the workers."""

    def __init__(self) -> None:
        self.at = -math.inf
        self.slots: dict[str, int] = {}

    def __call__(self) -> dict[str, int]:
        if time.monotonic() - self.at > SLOTS_SECONDS:
            from django.utils import timezone

            from pools import registry

            self.at = time.monotonic()
            try:
                self.slots = {pool: c.slots for pool, c in registry.capacity(timezone.now()).items()}
            except Exception:
                # The publish comes after the claim's commit: a failed read must not lose its
                # messages (they would wait for the publish grace). Without slots, a message per run.
                logger.warning("could not read the pools' live slots; publishing a message per run", exc_info=True)
                self.slots = {}
        return self.slots


class CeleryPublisher:
    """Publishes dispatches in the order given: a `tickwork.run_execution` message each, or, with
    `slots`, `tickwork.run_executions` messages of several where a pool has more than its slots.

    On a Redis broker the batch is written as the messages `apply_async` would write, pushed in one
    pipeline: one round trip per batch. A loop of `apply_async` costs a round trip and the whole of
    Celery's publish machinery per message, which made publishing, not the claim, the dispatcher's
    bottleneck. On other brokers (AMQP, the filesystem transport) every message goes through
    Celery's `send_task`, all on one producer, inside a kombu publish batch where the transport has one.
    """

    def __init__(self, app=None, *, slots: Callable[[], dict[str, int]] | None = None) -> None:
        """`slots`, the live slots of each pool (`LiveSlots`), lets a publish carry several runs
        of a pool in one message (`batches`); without it, each message carries one."""
        # The project's app (scheduler_project/celery.py), which Django's start-up makes current.
        self.app = app if app is not None else current_app._get_current_object()  # type: ignore[attr-defined]  # a Proxy
        self._default_format: bool | None = None
        # A Redis client per (pooled, reused) channel: kombu makes a new one for every write,
        # which was a third of a small batch's publishing time.
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.slots = slots

    def publish(self, dispatches: Sequence[Dispatch]) -> None:
        self.publish_messages(self._messages(dispatches))

    def publish_messages(self, messages: Sequence[Sequence[Dispatch]], *, front: bool = False) -> None:
        """Publish each message (one run, or a batch of one pool and priority) in order. With
        `front`, on a Redis broker, ahead of what waits in their queues: a batch's runs that its
        slot hands back (worker/batches.py) keep their place in line."""
        if not messages:
            return
        with self.app.producer_or_acquire() as producer:
            if self._can_pipeline(producer.channel, {queue_name(message[0].pool) for message in messages}):
                self._publish_redis(producer.channel, messages, front=front)
            else:
                self._publish_each(producer, messages)

    def _messages(self, dispatches: Sequence[Dispatch]) -> list[list[Dispatch]]:
        most = settings.TICKWORK_MESSAGE_BATCH if self.slots is not None else 1
        if most <= 1 or len(dispatches) <= 1 or self.slots is None:
            return [[item] for item in dispatches]
        return batches(dispatches, slots=self.slots(), most=most)

    def _publish_each(self, producer, messages: Sequence[Sequence[Dispatch]]) -> None:
        transport = producer.connection.transport.driver_type
        # kombu's publish batch pipelines where the transport can and publishes at once where not.
        with producer.batch():
            for message in messages:
                first = message[0]
                queue = queue_name(first.pool)
                self.app.send_task(
                    *_task_and_args(message),
                    queue=queue,
                    routing_key=queue,
                    producer=producer,
                    ignore_result=True,
                    priority=broker_priority(first.priority, transport=transport),
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

    def _publish_redis(self, channel, messages: Sequence[Sequence[Dispatch]], *, front: bool) -> None:
        origin, reply_to = _origin(), self.app.thread_oid
        single = RedisEnvelope(TASK_NAME, origin=origin, reply_to=reply_to)
        targets = [
            (queue_name(message[0].pool), broker_priority(message[0].priority, transport="redis"))
            for message in messages
        ]
        ones = [i for i, message in enumerate(messages) if len(message) == 1]
        rendered: list[str] = [""] * len(messages)
        for i, text in zip(
            ones,
            single.render_runs([(messages[i][0].execution_id, messages[i][0].lease_token, *targets[i]) for i in ones]),
            strict=True,
        ):
            rendered[i] = text
        if len(ones) < len(messages):
            batch = RedisEnvelope(BATCH_TASK_NAME, origin=origin, reply_to=reply_to)
            for i, message in enumerate(messages):
                if len(message) > 1:
                    rendered[i] = batch.render(_task_and_args(message)[1], *targets[i])
        by_key: dict[str, list[str]] = defaultdict(list)
        for (queue, priority), text in zip(targets, rendered, strict=True):
            # The list of the queue's priority step that the message lives in, named as kombu names it.
            by_key[channel._q_for_pri(queue, priority)].append(text)
        client = self._clients.get(channel)
        if client is None:
            with channel.conn_or_acquire() as client:  # the client kombu itself would write with
                self._clients[channel] = client
        pipe = client.pipeline(transaction=False)
        for key, texts in by_key.items():
            for start in range(0, len(texts), 1000):
                if front:
                    # Consumers pop from the tail: RPUSH a b leaves b at the tail, delivered
                    # before a, so the first message is pushed last.
                    pipe.rpush(key, *reversed(texts[start : start + 1000]))
                else:
                    # LPUSH a b c leaves c at the head; consumers pop from the tail: a is
                    # delivered first, as it would be after three single LPUSHes.
                    pipe.lpush(key, *texts[start : start + 1000])
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


def _task_and_args(message: Sequence[Dispatch]) -> tuple[str, tuple]:
    """The task and arguments of a message: (execution id, lease token) for one run; for a batch,
    its runs' [[execution id, lease token], …], their pool and their priority (what a slot needs
    to hand the batch's rest back to the broker as it came)."""
    if len(message) == 1:
        return TASK_NAME, (message[0].execution_id, message[0].lease_token)
    first = message[0]
    return BATCH_TASK_NAME, ([[item.execution_id, item.lease_token] for item in message], first.pool, first.priority)


def _origin() -> str:
    from celery.utils.nodenames import anon_nodename

    return anon_nodename()
