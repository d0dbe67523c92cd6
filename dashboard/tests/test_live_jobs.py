"""Job-level changes on the live WebSocket: a job paused, resumed or edited by any actor (here the
API, with a token) reaches the open pages of its tenant's members, and no one else's."""

import time

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from rest_framework.test import APIClient

from dashboard import job_changes
from scheduler_project.routing import websocket_urlpatterns
from tenants.services import token_create

pytestmark = pytest.mark.django_db(transaction=True)


def _communicator(user, jobs_after: int) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/dashboard/live/?jobs_after={jobs_after}"
    )
    communicator.scope["user"] = user
    return communicator


async def _jobs(communicator, timeout: float = 2.0) -> list[dict]:
    """The next job changes, past any execution events sent meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        message = await communicator.receive_json_from(timeout=max(deadline - time.monotonic(), 0.01))
        if message["type"] == "jobs":
            return message["jobs"]


def _api_pause(tenant, job) -> None:
    _, raw = token_create(tenant=tenant, name="deploy")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.post(f"/v1/jobs/{job.pk}/pause").status_code == 200


def test_a_job_paused_through_the_api_reaches_an_open_page_within_a_second(member, tenant, make_job):
    job = make_job(tenant, type="CRON", name="nightly")
    start = job_changes.latest_audit_id()

    async def scenario():
        communicator = _communicator(member, start)
        assert (await communicator.connect())[0]
        began = time.monotonic()
        await database_sync_to_async(_api_pause)(tenant, job)
        changes = await _jobs(communicator)
        assert time.monotonic() - began < 1.5
        assert [(c["jobId"], c["action"], c["state"], c["tenantId"]) for c in changes] == [
            (str(job.pk), "job.pause", "PAUSED", tenant.pk)
        ]
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_another_tenants_job_changes_never_arrive(member, other_tenant, make_job):
    theirs = make_job(other_tenant, type="CRON")
    start = job_changes.latest_audit_id()

    async def scenario():
        communicator = _communicator(member, start)
        assert (await communicator.connect())[0]
        await database_sync_to_async(_api_pause)(other_tenant, theirs)
        assert await communicator.receive_nothing(timeout=1.2)
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_a_change_made_between_the_render_and_the_connection_is_replayed(member, tenant, make_job):
    job = make_job(tenant, type="CRON")
    rendered_at = job_changes.latest_audit_id()
    _api_pause(tenant, job)  # after the page was rendered, before its socket opened

    async def scenario():
        communicator = _communicator(member, rendered_at)
        assert (await communicator.connect())[0]
        changes = await _jobs(communicator)
        assert [c["action"] for c in changes] == ["job.pause"]
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_a_job_change_wakes_the_poll_through_the_channel_layer(member, tenant, make_job, settings):
    """The audit row's commit is announced (audit.services.on_job_change → live.publish_job_changes)
    on the channel layer: the page reads at once, not at its next poll (30 s here)."""
    settings.TICKWORK_DASHBOARD_POLL_SECONDS = 30
    job = make_job(tenant, type="CRON")
    start = job_changes.latest_audit_id()

    async def scenario():
        communicator = _communicator(member, start)
        assert (await communicator.connect())[0]
        await communicator.receive_nothing(timeout=0.3)  # the first, immediate poll is done
        await database_sync_to_async(_api_pause)(tenant, job)
        changes = await _jobs(communicator, timeout=1.0)
        assert [c["action"] for c in changes] == ["job.pause"]
        await communicator.disconnect()

    async_to_sync(scenario)()
