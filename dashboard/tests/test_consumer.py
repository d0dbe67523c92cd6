"""The live WebSocket: who may connect, what each page receives, and how fast, in both modes
(the poll alone, and the poll woken by a channel-layer message)."""

import time
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from dashboard import job_changes
from dashboard.live import publisher as live
from dashboard.live import reads as live_reads
from scheduler_project.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)


def _communicator(user, after=None, at=None) -> WebsocketCommunicator:
    path = "/ws/dashboard/live/" + ("" if after is None else f"?after={after}") + ("" if at is None else f"&at={at}")
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    return communicator


async def _events(communicator, timeout: float = 2.0) -> list[dict]:
    message = await communicator.receive_json_from(timeout=timeout)
    assert message["type"] == "events"
    return message["events"]


def test_an_anonymous_socket_is_refused():
    """Without a session the socket is closed with 4401 (the page shows "Signed out")."""

    async def scenario():
        communicator = _communicator(AnonymousUser())
        connected, code = await communicator.connect()
        assert not connected
        assert code == 4401

    async_to_sync(scenario)()


def test_a_member_receives_its_tenants_changes_within_a_second(member, tenant, other_tenant, make_job):
    """With no channel layer between processes (the embedded default), the poll delivers a
    commit's events in well under a second; another tenant's never arrive."""

    async def scenario():
        communicator = _communicator(member)
        assert (await communicator.connect())[0]
        await database_sync_to_async(make_job)(other_tenant)
        began = time.monotonic()
        job = await database_sync_to_async(make_job)(tenant)
        events = await _events(communicator)
        elapsed = time.monotonic() - began
        assert [(e["jobId"], e["to"], e["from"]) for e in events] == [(str(job.pk), "PENDING", "")]
        assert elapsed < 1.0
        assert await communicator.receive_nothing(timeout=0.6)
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_staff_receive_every_tenants_changes(staff, tenant, other_tenant, make_job):
    async def scenario():
        communicator = _communicator(staff)
        await communicator.connect()
        await database_sync_to_async(make_job)(tenant)
        await database_sync_to_async(make_job)(other_tenant)
        seen = []
        while len(seen) < 2:
            seen += await _events(communicator)
        assert {e["tenantId"] for e in seen} == {tenant.pk, other_tenant.pk}
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_events_since_the_page_was_rendered_are_replayed(member, tenant, make_job):
    """A page passes the newest event id it was rendered with (?after=): what happened between
    the render and the socket opening is not lost."""

    async def scenario():
        rendered_at = await database_sync_to_async(live_reads.latest_event_id)()
        job = await database_sync_to_async(make_job)(tenant)
        communicator = _communicator(member, after=rendered_at)
        await communicator.connect()
        events = await _events(communicator)
        assert [e["jobId"] for e in events] == [str(job.pk)]
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_a_page_is_sent_the_derived_events_after_its_render_not_those_it_showed(member, tenant, make_job):
    """A happy run's events have no id (store/history.py): the page passes the time it was
    rendered at (?at=), and is sent what was made after it, not what it rendered (the last
    REPLAY_SECONDS were sent again, and every page re-read its live regions as it opened)."""

    async def scenario():
        # A second apart from the render either way: the app's clock and the feed's (the
        # database's, read off the monotonic clock) may differ by a fraction of a millisecond.
        shown = await database_sync_to_async(make_job)(tenant, now=timezone.now() - timedelta(seconds=1))
        after, _, at = await database_sync_to_async(job_changes.live_cursors)()
        job = await database_sync_to_async(make_job)(tenant, now=timezone.now() + timedelta(seconds=1))
        communicator = _communicator(member, after=after, at=at)
        await communicator.connect()
        events = await _events(communicator)
        assert [e["jobId"] for e in events] == [str(job.pk)], (shown.pk, events)
        assert await communicator.receive_nothing(timeout=0.5)
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_a_channel_layer_message_wakes_the_poll(member, tenant, make_job, settings):
    """With a layer that crosses processes (Redis), dashboard/live/publisher.py's group message makes the
    consumer read at once instead of at its next tick."""
    settings.TICKWORK_DASHBOARD_POLL_SECONDS = 30

    async def scenario():
        communicator = _communicator(member)
        await communicator.connect()
        await communicator.receive_nothing(timeout=0.3)  # the first, immediate poll is done
        job = await database_sync_to_async(make_job)(tenant)
        assert await communicator.receive_nothing(timeout=0.5)  # the poll sleeps for 30 s
        await get_channel_layer().group_send(
            live.GROUP,
            {
                "type": "executions.changed",
                "changes": [{"executionId": "x", "jobId": str(job.pk), "tenantId": tenant.pk, "state": "PENDING"}],
            },
        )
        events = await _events(communicator, timeout=1.0)
        assert [e["jobId"] for e in events] == [str(job.pk)]
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_publish_state_changes_reaches_a_listening_page(member, tenant, make_job, settings):
    """live.publish_state_changes, as called after a commit, lands on the group the consumer
    joined (in-process here; across processes with Redis)."""
    settings.TICKWORK_DASHBOARD_POLL_SECONDS = 30

    async def scenario():
        communicator = _communicator(member)
        await communicator.connect()
        await communicator.receive_nothing(timeout=0.3)
        job = await database_sync_to_async(make_job)(tenant)
        execution = await database_sync_to_async(lambda: job.executions.get())()
        await database_sync_to_async(live.publish_state_changes)([(execution.pk, job.pk, tenant.pk, "PENDING")])
        events = await _events(communicator, timeout=1.0)
        assert [e["executionId"] for e in events] == [str(execution.pk)]
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_publish_state_changes_is_cheap_when_no_page_listens(monkeypatch):
    """In a dispatcher or worker without Redis nothing listens in-process: no send is attempted,
    and nothing ever raises into the caller."""
    layer = get_channel_layer()
    sent = []
    monkeypatch.setattr(layer, "group_send", lambda *a, **k: sent.append(a))
    live.publish_state_changes([("e", "j", 1, "RUNNING")])
    assert sent == []
    monkeypatch.setattr("channels.layers.get_channel_layer", lambda *a: 1 / 0)
    live.publish_state_changes([("e", "j", 1, "RUNNING")])  # does not raise


def test_every_move_of_a_happy_run_reaches_the_page_without_an_event_row(member, tenant, make_job, drive):
    """A happy run writes no event row (store/history.py): its moves reach the page from the
    execution's columns, each once, oldest first, with no id; a move off the happy path then
    arrives as rows (the history so far, then the move), with their ids."""
    from executions.models import ExecutionEvent

    async def scenario():
        communicator = _communicator(member)
        assert (await communicator.connect())[0]
        job = await database_sync_to_async(make_job)(tenant)
        execution = await database_sync_to_async(lambda: job.executions.get())()
        seen: list[dict] = []
        while len(seen) < 1:
            seen += await _events(communicator)
        await database_sync_to_async(drive)(execution, "RUNNING")
        while len(seen) < 3:
            seen += await _events(communicator)
        assert [(e["from"], e["to"], e["id"]) for e in seen] == [
            ("", "PENDING", None),
            ("PENDING", "QUEUED", None),
            ("QUEUED", "RUNNING", None),
        ]
        assert seen[-1]["worker"] == "worker-1"
        assert await communicator.receive_nothing(timeout=0.6)  # each once
        assert not await database_sync_to_async(ExecutionEvent.objects.filter(execution_id=execution.pk).exists)()

        await database_sync_to_async(live_cancel)(execution.pk)
        rows: list[dict] = []
        while len(rows) < 4:
            rows += await _events(communicator)
        assert [(e["from"], e["to"]) for e in rows] == [
            ("", "PENDING"),
            ("PENDING", "QUEUED"),
            ("QUEUED", "RUNNING"),
            ("RUNNING", "RUNNING"),
        ]
        assert all(isinstance(e["id"], int) for e in rows)
        await communicator.disconnect()

    async_to_sync(scenario)()


def live_cancel(execution_id) -> None:
    """A cancel request: the first move off the happy path of a running execution."""
    from django.utils import timezone

    from executions import transitions

    assert transitions.request_cancel(execution_id=execution_id, now=timezone.now(), reason="test")
