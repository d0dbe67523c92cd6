"""The dashboard's WebSocket: pushes execution state changes and job-level changes to the open pages.

`ws/dashboard/live/?after=<event id>&at=<time>`: the page passes the newest event id it was
rendered with and the time it was rendered at (the derived events, which have no id, are those
after it), so nothing that happened between the render and the connection is missed. Messages to
the browser: {"type": "events", "events": [{id, executionId, jobId, tenantId, runId (a workflow
step's run, else null), from, to, attempt, at, worker, message}, ...]}, oldest first, only of the caller's tenants;
and with `&jobs_after=<audit row id>`, {"type": "jobs", "jobs": [{id, jobId, tenantId, action, state}, ...]}: a
job paused, resumed, edited or cancelled by anyone (dashboard/job_changes.py).
See dashboard/live/feed.py for where the events come from in each mode.
"""

import logging
import math
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from dashboard.live.feed import feed
from dashboard.live.publisher import GROUP
from tenants.selectors import scope_of

logger = logging.getLogger(__name__)
# Close codes in the application range (4000-4999) that the page understands.
UNAUTHENTICATED = 4401


class LiveConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHENTICATED)
            return
        self.tenant_scope = await database_sync_to_async(scope_of)(user=user)
        self.feed = feed()
        # Read before the accept: whatever commits once the page (or a client) knows it is
        # connected comes after these, and reaches it. Read after, a move committed meanwhile
        # was already behind the feed's start, and never sent.
        starts = await self.feed.starts(
            after=_after(self.scope), jobs_after=_after(self.scope, "jobs_after"), at=_at(self.scope)
        )
        await self.accept()
        self.joined = False
        if self.channel_layer is not None:
            try:
                await self.channel_layer.group_add(GROUP, self.channel_name)
                self.joined = True
            except Exception:  # the layer only speeds updates up; the feed's poll still runs
                logger.warning("live: channel layer unavailable; polling only", exc_info=True)
        await self.feed.subscribe(self, scope=self.tenant_scope, starts=starts)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "feed", None) is not None:
            self.feed.unsubscribe(self)
        if getattr(self, "joined", False):
            try:
                await self.channel_layer.group_discard(GROUP, self.channel_name)
            except Exception:
                logger.debug("live: group_discard failed", exc_info=True)

    async def receive_json(self, content: Any, **kwargs) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def executions_changed(self, message: dict[str, Any]) -> None:
        """A commit somewhere changed executions (channel layer group "executions"): read now if
        any of them is ours. The message itself is not forwarded: the rows are the truth."""
        scope = self.tenant_scope
        changes = message.get("changes") or []
        if scope is None or any(change.get("tenantId") in scope for change in changes):
            self.feed.poke()

    async def deliver(self, events: list[dict[str, Any]]) -> None:
        await self.send_json({"type": "events", "events": events})

    async def deliver_jobs(self, jobs: list[dict[str, Any]]) -> None:
        await self.send_json({"type": "jobs", "jobs": jobs})


def _at(scope: dict[str, Any]) -> float | None:
    """`at`: the time (seconds since the epoch) the page was rendered at, or of the newest derived
    event it was sent."""
    query = parse_qs(scope.get("query_string", b"").decode())
    try:
        at = float(query["at"][0])
    except (KeyError, ValueError, IndexError):
        return None
    return at if math.isfinite(at) else None


def _after(scope: dict[str, Any], name: str = "after") -> int | None:
    query = parse_qs(scope.get("query_string", b"").decode())
    try:
        return int(query[name][0])
    except (KeyError, ValueError, IndexError):
        return None
