"""A dead-letter group retry with real processes (a dispatcher, a sweeper and a Celery prefork
worker; PostgreSQL with Redis, and the embedded default): issue 31, item 1. Its reproduction:
12 jobs whose handler always fails, 2 attempts each, all DEAD, then one retry of their group.
The retry answered 56 re-drives for 12, one execution was re-driven five times in 2 s (its
handler ran five times), and "post again while remaining > 0" never ended."""

import pytest
from django.utils import timezone

from executions.models import Execution, ExecutionEvent
from testing.harness import wait_for

pytestmark = pytest.mark.e2e

GROUP_REDRIVE = "re-driven with its error group"


def _all_dead(ids, attempt: int) -> bool:
    return Execution.objects.filter(pk__in=ids, state="DEAD", attempt=attempt).count() == len(ids)


def test_a_group_retry_redrives_each_execution_once(live, api):
    """One POST of the group's retry re-drives each of the 12 exactly once (done 12, remaining 0,
    no cursor), though each fails again within milliseconds on a worker; each execution's
    history shows one re-drive, and it ends DEAD again at its third attempt, once."""
    live.worker(concurrency=4, wait=False)
    live.dispatcher()
    live.sweeper()
    live.ready()
    now = timezone.now().isoformat()
    jobs = [
        {
            "name": f"order-{n}",
            "type": "ONCE",
            "runAt": now,
            "target": {"handler": "fail"},
            "payload": {"message": f"order {1000 + n} failed for user 'u{n}'"},
            "retryPolicy": {"maxAttempts": 2, "initialDelayMs": 500},
        }
        for n in range(12)
    ]
    created = api.post("/v1/jobs/bulk", {"jobs": jobs}, format="json")
    assert created.status_code == 201, created.content
    ids = list(
        Execution.objects.filter(job_id__in=[j["jobId"] for j in created.json()["jobs"]]).values_list("pk", flat=True)
    )
    assert len(ids) == 12
    wait_for(lambda: _all_dead(ids, 2), timeout=60, what="all 12 DEAD after their 2 attempts")
    (group,) = api.get("/v1/dead-letter/groups").json()["results"]
    assert group["count"] == 12

    answer = api.post(f"/v1/dead-letter/groups/{group['fingerprint']}/retry").json()

    assert (answer["done"], answer["refused"], answer["remaining"]) == (12, 0, 0), answer
    assert answer["cursor"] is None
    wait_for(lambda: _all_dead(ids, 3), timeout=60, what="all 12 DEAD again after the one re-drive")
    for execution_id in ids:
        messages = list(ExecutionEvent.objects.filter(execution_id=execution_id).values_list("message", flat=True))
        assert sum(GROUP_REDRIVE in m for m in messages) == 1, messages
        assert ExecutionEvent.objects.filter(execution_id=execution_id, to_state="RUNNING").count() == 3
