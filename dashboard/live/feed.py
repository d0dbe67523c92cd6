"""The live feed behind the dashboard's WebSocket: execution events as they commit, and job-level
changes (pause, resume, edit by any actor: dashboard/job_changes.py) beside them.

The source of truth is the ExecutionEvent table, read by primary key: `id > cursor`, a range
scan of a few rows. One poller per server process (per event loop) serves every open page:
each poll is one query for all subscribers, whatever their number, and each subscriber gets
the events of its own tenants, in id order.

Two ways in, one path out:
- embedded default (no Redis): web, dispatcher and workers are separate processes, and the
  in-memory channel layer cannot carry a message between them. The poller looks every
  POLL_SECONDS (0.4 s), so a change shows within about half a second.
- with Redis: dashboard/live/publisher.py sends a message to the channel layer group "executions" after
  each commit; the consumer hears it and `poke`s the poller, which reads at once. The poll
  still runs, less often (POLL_SECONDS_WITH_LAYER), so a lost message only delays an update.
Either way the browser receives rows read from the database, never a message that might have
raced its transaction, and the same code is exercised in both modes.

Job changes ride on the same poll (one more primary-key range read, of the audit log) and go to
each subscriber's `deliver_jobs`. With Redis, an audit row about a job is announced on the
channel layer after its commit (audit.services.on_job_change → live.publish_job_changes) and
pokes the poller as an execution's change does; without, the poll carries them too.

Event ids come from a sequence taken at INSERT, so a transaction that commits late can make an
id appear below the cursor. Each poll therefore looks SLACK ids back and skips what it has
already delivered; the pages re-render from the database on each update, so a straggler older
than that is at worst a moment late.

An execution on the happy path has no event rows (store/history.py): its events are told by its
columns, and each of its moves sets its `updated_at`. So each poll also reads the executions
whose history is derived and that changed since a second cursor, a time (each subscriber's
newest derived event, DERIVED_SLACK back for a late commit: its time is the move's, taken before
its commit), and hands out their events that are new to each subscriber (`id` null: they have no
row; told apart by execution, move, attempt and time). A page passes the time it was rendered at
(or, reconnecting, of the newest derived event it got) and gets those after it (at most
REPLAY_SECONDS back): what it rendered it does not get again, which would make it re-read its live
regions as it opens. (A move whose time is before the render but whose commit is after its reads
is missed there, as a row whose id is below the page's `after` and commits after it is: the
region is re-read at its next change.) A client that passes `after` alone gets those of the last
REPLAY_SECONDS.
"""

import asyncio
import logging
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from dashboard import job_changes
from dashboard.live import reads as live_reads
from executions.clock import db_now

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.4
POLL_SECONDS_WITH_LAYER = 1.0
SLACK = 256
# How far back each poll looks for derived events (seconds), and a page that passes `after` too.
DERIVED_SLACK = 2.0
REPLAY_SECONDS = 10.0
BATCH = 500
# A page that was rendered long ago does not get more than this much history replayed.
MAX_REPLAY = 2000


class Subscriber(Protocol):
    async def deliver(self, events: list[dict[str, Any]]) -> None: ...


class _Subscription:
    def __init__(
        self,
        subscriber: Subscriber,
        scope: list[int] | None,
        after: int,
        jobs_after: int = 0,
        derived_after: datetime | None = None,
    ) -> None:
        self.subscriber = subscriber
        # The derived events (no row) at or before this time are not this page's news.
        self.derived_floor = derived_after or datetime.now(UTC)
        self.derived_cursor = self.derived_floor
        self.derived_sent: deque[tuple] = deque(maxlen=SLACK * 4)
        self.derived_sent_set: set[tuple] = set()
        # The audit row past which job changes are new to this page. An audit row commits within
        # moments of taking its id (in the request's transaction), so no look-back as for events.
        self.jobs_cursor = jobs_after
        self.scope = None if scope is None else frozenset(scope)
        # Never deliver at or below `floor`: the page was rendered with those already applied.
        self.floor = after
        self.cursor = after
        self.sent: deque[int] = deque(maxlen=SLACK * 4)
        self.sent_set: set[int] = set()

    def wants(self, event: dict[str, Any]) -> bool:
        if event["id"] <= self.floor or event["id"] in self.sent_set:
            return False
        return self.scope is None or event["tenantId"] in self.scope

    def mark(self, event_id: int) -> None:
        if len(self.sent) == self.sent.maxlen:
            self.sent_set.discard(self.sent[0])
        self.sent.append(event_id)
        self.sent_set.add(event_id)
        self.cursor = max(self.cursor, event_id)

    @property
    def low(self) -> int:
        return max(self.floor, self.cursor - SLACK)

    def wants_derived(self, event: dict[str, Any]) -> bool:
        if event["_at"] <= self.derived_floor or _key(event) in self.derived_sent_set:
            return False
        return self.scope is None or event["tenantId"] in self.scope

    def mark_derived(self, event: dict[str, Any]) -> None:
        if len(self.derived_sent) == self.derived_sent.maxlen:
            self.derived_sent_set.discard(self.derived_sent[0])
        key = _key(event)
        self.derived_sent.append(key)
        self.derived_sent_set.add(key)
        self.derived_cursor = max(self.derived_cursor, event["_at"])


def _key(event: dict[str, Any]) -> tuple:
    """A derived event (it has no id): its execution, move, attempt and time."""
    return (event["executionId"], event["to"], event["attempt"], event["_at"])


def poll_interval() -> float:
    layer = get_channel_layer()
    carries_between_processes = layer is not None and not isinstance(layer, InMemoryChannelLayer)
    default = POLL_SECONDS_WITH_LAYER if carries_between_processes else POLL_SECONDS
    return float(getattr(settings, "TICKWORK_DASHBOARD_POLL_SECONDS", default))


class Feed:
    """One poller for all the subscribers on this event loop."""

    def __init__(self) -> None:
        self._subscriptions: dict[int, _Subscription] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def starts(
        self, *, after: int | None, jobs_after: int | None = None, at: float | None = None
    ) -> tuple[int, int, datetime]:
        """Where a subscriber's feed starts: after the event row, the audit row and the derived
        events' time its page names, or, where it names none, after what is there now."""
        latest = await database_sync_to_async(live_reads.latest_event_id)()
        start = latest if after is None else max(min(after, latest), latest - MAX_REPLAY)
        now = await database_sync_to_async(db_now)()
        if at is None:
            derived_after = now - timedelta(seconds=DERIVED_SLACK if after is None else REPLAY_SECONDS)
        else:  # what came after the page's render (or its newest derived event): it showed the rest
            since = min(datetime.fromtimestamp(at, UTC), now)
            derived_after = max(since, now - timedelta(seconds=REPLAY_SECONDS))
        latest_audit = await database_sync_to_async(job_changes.latest_audit_id)()
        jobs_start = (
            latest_audit if jobs_after is None else max(min(jobs_after, latest_audit), latest_audit - MAX_REPLAY)
        )
        return start, jobs_start, derived_after

    async def subscribe(
        self, subscriber: Subscriber, *, scope: list[int] | None, starts: tuple[int, int, datetime]
    ) -> None:
        self._subscriptions[id(subscriber)] = _Subscription(subscriber, scope, *starts)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        self.poke()

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscriptions.pop(id(subscriber), None)
        if not self._subscriptions and self._task is not None:
            self._task.cancel()
            self._task = None

    def poke(self) -> None:
        """Read now rather than at the next tick (a channel-layer message said something moved)."""
        self._wake.set()

    async def _run(self) -> None:
        interval = poll_interval()
        while self._subscriptions:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=interval)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed poll (database restarting) is retried at the next tick
                logger.warning("live feed poll failed", exc_info=True)

    async def poll_once(self) -> int:
        """Read events past the lowest cursor and hand each subscriber its own; returns how many
        events were read."""
        subscriptions = list(self._subscriptions.values())
        if not subscriptions:
            return 0
        after = min(s.low for s in subscriptions)
        scope = _union_scope(subscriptions)
        events = await database_sync_to_async(live_reads.live_events_after)(scope=scope, after=after, limit=BATCH)
        since = min(s.derived_cursor for s in subscriptions) - timedelta(seconds=DERIVED_SLACK)
        derived = await database_sync_to_async(live_reads.live_derived_since)(scope=scope, since=since, limit=BATCH)
        for subscription in subscriptions:
            mine = [event for event in events if subscription.wants(event)]
            for event in mine:
                subscription.mark(event["id"])
            for event in derived:
                if subscription.wants_derived(event):
                    subscription.mark_derived(event)
                    mine.append({name: value for name, value in event.items() if name != "_at"})
            if mine:
                try:
                    await subscription.subscriber.deliver(mine)
                except Exception:  # one closed socket must not stop the others' updates
                    logger.debug("live delivery failed", exc_info=True)
        more_jobs = await self._poll_jobs(subscriptions, scope)
        if len(events) == BATCH or more_jobs:
            self.poke()  # more is waiting: read again without sleeping
        return len(events) + len(derived)

    async def _poll_jobs(self, subscriptions: list[_Subscription], scope: list[int] | None) -> bool:
        """Hand each subscriber that takes them the job changes past its cursor; True if a full
        batch was read (more may wait)."""
        takers = [s for s in subscriptions if hasattr(s.subscriber, "deliver_jobs")]
        if not takers:
            return False
        after = min(s.jobs_cursor for s in takers)
        changes = await database_sync_to_async(job_changes.job_changes_after)(scope=scope, after=after, limit=BATCH)
        for subscription in takers:
            mine = [
                change
                for change in changes
                if change["id"] > subscription.jobs_cursor
                and (subscription.scope is None or change["tenantId"] in subscription.scope)
            ]
            if not mine:
                continue
            subscription.jobs_cursor = mine[-1]["id"]
            try:
                await subscription.subscriber.deliver_jobs(mine)  # type: ignore[attr-defined]
            except Exception:
                logger.debug("live delivery failed", exc_info=True)
        return len(changes) == BATCH


def _union_scope(subscriptions: list[_Subscription]) -> list[int] | None:
    """The tenants any subscriber may see, for one query serving them all; None if one is staff."""
    tenants: set[int] = set()
    for subscription in subscriptions:
        if subscription.scope is None:
            return None
        tenants |= subscription.scope
    return sorted(tenants)


_feeds: dict[asyncio.AbstractEventLoop, Feed] = {}


def feed() -> Feed:
    """The feed of the running event loop (daphne runs one; tests may run several in turn)."""
    loop = asyncio.get_running_loop()
    for other in [other for other in _feeds if other.is_closed()]:
        del _feeds[other]
    if loop not in _feeds:
        _feeds[loop] = Feed()
    return _feeds[loop]
