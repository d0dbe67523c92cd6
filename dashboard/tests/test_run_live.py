"""The live feed for workflow runs: each event of a step names its run (runId), so the run page
(whose region is marked data-live-run) refreshes on its own run's moves and on no other's."""

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from dashboard.live import reads as live_reads
from jobs.models import Job
from scheduler_project.routing import websocket_urlpatterns
from scheduling import runs

pytestmark = pytest.mark.django_db(transaction=True)


def _fire_diamond(tenant):
    job = Job.objects.create(
        tenant=tenant,
        name="diamond",
        type="ONCE",
        run_at=timezone.now(),
        pool="",
        handler="",
        workflow={
            "steps": [
                {"name": name, "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ups}
                for name, ups in (("A", []), ("B", ["A"]), ("C", ["A"]), ("D", ["B", "C"]))
            ]
        },
    )
    now = timezone.now()
    fired = runs.fire(job=job, scheduled_for=now, now=now)
    return job, fired.run_id, {e.step: e for e in fired.executions}


def test_a_steps_moves_reach_the_page_with_their_run(member, tenant, drive):
    """A run starts (A PENDING, B, C, D BLOCKED), then A succeeds and releases B and C: every
    event arrives with the run's id; a plain job's event has none."""

    async def scenario():
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/dashboard/live/")
        communicator.scope["user"] = member
        assert (await communicator.connect())[0]
        job, run_id, steps = await database_sync_to_async(_fire_diamond)(tenant)
        await database_sync_to_async(drive)(steps["A"], "SUCCEEDED")
        seen: list[dict] = []
        while not any(e["executionId"] == str(steps["C"].pk) and e["to"] == "PENDING" for e in seen):
            message = await communicator.receive_json_from(timeout=2.0)
            seen += message["events"]
        assert {e["runId"] for e in seen} == {str(run_id)}
        assert {e["jobId"] for e in seen} == {str(job.pk)}
        moves = {(e["executionId"], e["from"], e["to"]) for e in seen}
        assert (str(steps["D"].pk), "", "BLOCKED") in moves
        assert (str(steps["A"].pk), "RUNNING", "SUCCEEDED") in moves
        assert (str(steps["B"].pk), "BLOCKED", "PENDING") in moves
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_a_plain_jobs_events_have_no_run(member, tenant, make_job):

    since = timezone.now() - timedelta(seconds=1)
    make_job(tenant)
    assert [e["runId"] for e in live_reads.live_derived_since(scope=[tenant.pk], since=since)] == [None]
