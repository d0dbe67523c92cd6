"""A backfill on real processes (a Celery worker of 4 slots, a dispatcher, a sweeper whose
backfill service releases the fires): 24 hourly fires with maxConcurrent 2 never run more than 2
at once, measured from the executions' started_at and finished_at, and the same backfill again
creates nothing new."""

from datetime import UTC, datetime

import pytest

from executions.models import Backfill, Execution, Origin
from testing.harness import wait_for

pytestmark = pytest.mark.e2e

RANGE = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-02T00:00:00Z"}


def _most_at_once(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals [start, end) holding one instant (an end before a start at a tie)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_a_backfill_of_24_hourly_fires_runs_at_most_2_at_once_and_again_creates_nothing(live, tenant, make_job, api):
    live.worker(concurrency=4)
    live.dispatcher()
    live.sweeper()
    live.ready()
    job = make_job(tenant, type="CRON", schedule="0 * * * *", handler="sleep", payload={"seconds": 0.3})

    answer = api.post(f"/v1/jobs/{job.pk}/backfill", {**RANGE, "maxConcurrent": 2}, format="json")
    assert answer.status_code == 201, answer.json()
    backfill_id = answer.json()["backfillId"]
    assert answer.json()["counts"]["fires"] == 24

    def done():
        return Backfill.objects.filter(pk=backfill_id, state="DONE").exists()

    wait_for(done, timeout=90, interval=0.1, what=f"the backfill to finish\n{live.tails()}")
    runs = list(Execution.objects.filter(job=job, origin=Origin.BACKFILL))
    assert len(runs) == 24
    assert {r.state for r in runs} == {"SUCCEEDED"}
    assert sorted(r.scheduled_for for r in runs) == [datetime(2026, 3, 1, h, tzinfo=UTC) for h in range(24)]
    assert _most_at_once([(r.started_at, r.finished_at) for r in runs]) == 2
    body = api.get(f"/v1/backfills/{backfill_id}").json()
    assert (body["state"], body["counts"]["SUCCEEDED"], body["counts"]["waiting"]) == ("DONE", 24, 0)

    again = api.post(f"/v1/jobs/{job.pk}/backfill", {**RANGE, "maxConcurrent": 2}, format="json").json()
    assert (again["counts"]["fires"], again["counts"]["skipped"]) == (0, 24)
    wait_for(
        lambda: Backfill.objects.filter(pk=again["backfillId"], state="DONE").exists(),
        timeout=30,
        what="the empty backfill to finish",
    )
    assert Execution.objects.filter(job=job, origin=Origin.BACKFILL).count() == 24
