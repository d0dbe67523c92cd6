"""The publisher seam: how claimed executions reach the workers' queues.

Celery is a transport, not the source of truth: a message carries only the execution id and
the lease token, goes out after the claim commits, and may be lost or duplicated; the row
decides what runs. `InMemoryPublisher` lets unit tests watch what would have been sent.
"""

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
    """Publishes a batch through one producer: a connection checked out once per batch, not once
    per message, is most of the difference against a loop of `apply_async`."""

    def __init__(self, app=None) -> None:
        if app is None:
            from scheduler_project.celery import app
        self.app = app

    def publish(self, dispatches: Sequence[Dispatch]) -> None:
        if not dispatches:
            return
        with self.app.producer_or_acquire() as producer:
            for item in dispatches:
                self.app.send_task(
                    TASK_NAME,
                    args=(item.execution_id, item.lease_token),
                    queue=queue_name(item.pool),
                    routing_key=queue_name(item.pool),
                    producer=producer,
                    ignore_result=True,
                )
