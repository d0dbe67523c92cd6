"""The publisher seam: how claimed executions reach the workers' queues.

Celery is a transport, not the source of truth: a message carries only the execution id and
the lease token, goes out after the claim commits, and may be lost or duplicated; the row
decides what runs. `InMemoryPublisher` lets unit tests watch what would have been sent.
"""

import base64
import json
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from jobs.registry import queue_name

TASK_NAME = "tickwork.run_execution"


@dataclass(frozen=True)
class Dispatch:
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
        if app is None:
            from scheduler_project.celery import app
        self.app = app

    def publish(self, dispatches: Sequence[Dispatch]) -> None:
        if not dispatches:
            return
        with self.app.producer_or_acquire() as producer:
            if self._can_pipeline(producer.channel, {queue_name(item.pool) for item in dispatches}):
                self._publish_redis(producer.channel, dispatches)
            else:
                self._publish_each(producer, dispatches)

    def _publish_each(self, producer, dispatches: Sequence[Dispatch]) -> None:
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
        conf = self.app.conf
        return (
            isinstance(channel, RedisChannel)
            and conf.task_protocol == 2
            and conf.task_serializer == "json"
            and not conf.task_compression
            and not conf.task_default_priority
            and not conf.task_send_sent_event
            and not signals.before_task_publish.receivers
            and not signals.after_task_publish.receivers
            and not queues & set(channel._expires)
        )

    def _publish_redis(self, channel, dispatches: Sequence[Dispatch]) -> None:
        envelope = RedisEnvelope(TASK_NAME, origin=_origin(), reply_to=self.app.thread_oid)
        by_key: dict[str, list[str]] = defaultdict(list)
        for item in dispatches:
            queue = queue_name(item.pool)
            # The list a message of priority 0 (apply_async's default) lives in, named as kombu names it.
            by_key[channel._q_for_pri(queue, 0)].append(envelope.render((item.execution_id, item.lease_token), queue))
        with channel.conn_or_acquire() as client:
            pipe = client.pipeline(transaction=False)
            for key, messages in by_key.items():
                # LPUSH a b c leaves c at the head; consumers pop from the tail: a is delivered
                # first, as it would be after three single LPUSHes.
                for start in range(0, len(messages), 1000):
                    pipe.lpush(key, *messages[start : start + 1000])
            pipe.execute()


class RedisEnvelope:
    """A Celery protocol 2 message for a task called with positional arguments and no result, as
    kombu's Redis transport stores it: the JSON of {body (base64 of the JSON [args, kwargs, embed]), content-type,
    content-encoding, headers (celery.app.amqp.as_task_v2), properties (with delivery_info,
    delivery_tag and body_encoding added by kombu.transport.virtual.Channel.basic_publish)}.

    Everything but the ids, the arguments and the queue is the same for every message, so the
    JSON is rendered once into a template and each message fills in its slots.
    """

    def __init__(self, task: str, *, origin: str, reply_to: str) -> None:
        slot = {name: f"\x00{name}\x00" for name in ("id", "argsrepr", "queue", "body", "tag")}
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
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": slot["tag"],
            },
        }
        template = json.dumps(message).replace("%", "%%")
        for name, marker in slot.items():
            template = template.replace(json.dumps(marker), f"%({name})s")
        self.template = template

    def render(self, args: tuple, queue: str) -> str:
        body = json.dumps([args, {}, _EMBED]).encode()
        # Ids and base64 need no JSON escaping; the rest goes through json.dumps.
        return self.template % {
            "id": f'"{uuid.uuid4()}"',
            "argsrepr": json.dumps(repr(args)),
            "queue": json.dumps(queue),
            "body": f'"{base64.b64encode(body).decode()}"',
            "tag": f'"{uuid.uuid4()}"',
        }


# The third element of a protocol 2 body: no callbacks, errbacks, chain or chord.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def _origin() -> str:
    from celery.utils.nodenames import anon_nodename

    return anon_nodename()
