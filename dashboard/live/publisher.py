"""After-commit messages about state changes, for the live views.

Sent to the Channels layer group `executions` (Redis in production). The dashboard's consumers
(dashboard/live/consumer.py) take a message as a cue to read the new ExecutionEvent rows at once;
they also poll those rows, so losing a message only delays an update, and without Redis (the
in-memory layer cannot cross processes) the poll alone carries it. The row is always the truth.

Called after every commit that moved executions, on the dispatcher's and workers' hot path:
it must stay cheap and must never raise.
"""

import asyncio
import logging
import queue
import time
from typing import Any

from background.process_thread import ProcessThread

logger = logging.getLogger(__name__)
GROUP = "executions"
# How long a cross-process sender gathers changes before it sends them as one message.
LINGER_SECONDS = 0.05


def publish_state_changes(changes: list[tuple[Any, Any, int, str]]) -> None:
    if not changes:
        return
    try:
        from asgiref.sync import async_to_sync
        from channels.layers import InMemoryChannelLayer, get_channel_layer

        layer = get_channel_layer()
        if layer is None:
            return
        if isinstance(layer, InMemoryChannelLayer):
            if not layer.groups.get(GROUP):
                # An in-memory layer reaches only this process; with no page listening here (always
                # so in a dispatcher or worker) a send would cost an event loop and reach no one.
                return
            async_to_sync(layer.group_send)(GROUP, _message(changes))
            return
        _Sender.of_process(layer).put(changes)
    except Exception:  # a live view is a convenience; never fail a state change over it
        logger.debug("live update not sent", exc_info=True)


def publish_job_changes(changes: list[tuple[Any, int | None]]) -> None:
    """A job was changed (audit.services.on_job_change): the same cue as an execution's change,
    with no execution, so the pages of its tenant read the new rows (dashboard/job_changes.py) at
    once rather than at their next poll."""
    publish_state_changes([(None, job_id, tenant_id, "") for job_id, tenant_id in changes if tenant_id is not None])


def _message(changes: list[tuple[Any, Any, int, str]]) -> dict:
    return {
        "type": "executions.changed",
        "changes": [
            {"executionId": str(eid), "jobId": str(jid), "tenantId": tid, "state": str(state)}
            for eid, jid, tid, state in changes
        ],
    }


class _Sender(ProcessThread):
    """Sends to a cross-process layer (Redis) from a thread of this process with one event loop
    of its own, so the layer keeps one connection. A transition only queues its changes: it never
    waits for Redis (async_to_sync per transition cost a new loop and connection each time, most
    of a short run's time in a worker). What queues up meanwhile goes out as one message."""

    def __init__(self, layer) -> None:
        super().__init__(name="live-updates")
        self.layer = layer
        self.pending: queue.SimpleQueue = queue.SimpleQueue()

    def serves(self, layer) -> bool:
        return layer is self.layer

    def put(self, changes: list) -> None:
        self.pending.put(changes)

    def run(self) -> None:
        loop = asyncio.new_event_loop()
        while True:
            changes = list(self.pending.get())
            # A message is a cue (pages also poll): waiting a moment lets a busy worker's many
            # transitions share one send, instead of one send (and its CPU) each.
            time.sleep(LINGER_SECONDS)
            while len(changes) < 5000:
                try:
                    changes += self.pending.get_nowait()
                except queue.Empty:
                    break
            try:
                loop.run_until_complete(self.layer.group_send(GROUP, _message(changes)))
            except Exception:
                logger.debug("live update not sent", exc_info=True)
