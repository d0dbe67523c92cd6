"""pauseAfterFailures on real roles: an INTERVAL job of 1 s whose handler always fails, one attempt
a fire, `pauseAfterFailures` 3, on a real Celery worker and dispatcher beside the alerter
(`manage.py run_alerter`). The third fire to end DEAD pauses the job, with its `pausedReason`; no
fourth fire starts while it is paused; the JOB_AUTO_PAUSED alert reaches a webhook receiver,
signed. A resume clears the reason and the count: the job fires again, and pauses again only
after three more failed fires."""

import sys
import time

import pytest

from audit.models import AuditEntry
from executions.models import Execution
from tenants import signing
from testing.harness import wait_for
from testing.webhooks import start_receiver

pytestmark = pytest.mark.e2e


@pytest.fixture
def receiver():
    found = start_receiver()
    yield found
    found.stop()


def _dead(job_id: str) -> int:
    return Execution.objects.filter(job_id=job_id, state="DEAD").count()


def test_three_failed_fires_in_a_row_pause_the_job_and_page_until_it_is_resumed(live, api, tenant, receiver):
    live.worker()
    live.dispatcher()
    live.start(
        "alerter",
        [sys.executable, "manage.py", "run_alerter"],
        env={"TICKWORK_ALERTS_INTERVAL_SECONDS": "0.5", "TICKWORK_HTTP_ALLOW_PRIVATE": "true"},
    )
    live.ready()
    rule = api.post(
        "/v1/alerts/rules",
        {
            "name": "a job stopped itself",
            "kind": "JOB_AUTO_PAUSED",
            "channels": [{"type": "webhook", "url": receiver.url}],
        },
        format="json",
    )
    assert rule.status_code == 201, rule.json()
    created = api.post(
        "/v1/jobs",
        {
            "name": "sync with a broken partner",
            "type": "INTERVAL",
            "everySec": 1,
            "target": {"handler": "fail"},
            "retryPolicy": {"maxAttempts": 1},
            "pauseAfterFailures": 3,
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    job_id = created.json()["jobId"]

    paused = wait_for(
        lambda: (body := api.get(f"/v1/jobs/{job_id}").json())["state"] == "PAUSED" and body,
        timeout=30,
        what="the job to be paused by the system",
    )
    assert paused["pausedReason"] == "paused after 3 consecutive failed fires"
    assert _dead(job_id) == 3
    assert AuditEntry.objects.get(job_id=job_id, action="job.auto_pause").actor_kind == "system"

    wait_for(lambda: len(receiver.requests) >= 1, timeout=20, what="the JOB_AUTO_PAUSED webhook")
    fired = receiver.requests[0]
    assert signing.verify(
        fired.headers.get(signing.SIGNATURE_HEADER), fired.body, secrets=[tenant.signing_secret], now=time.time()
    )
    body = fired.json()
    assert (body["kind"], body["state"], body["subject"]) == ("JOB_AUTO_PAUSED", "FIRING", f"job:{job_id}")
    assert "paused after 3 consecutive failed fires" in body["summary"]

    time.sleep(2.5)  # more than two periods: no fourth fire starts while it is paused
    assert Execution.objects.filter(job_id=job_id, started_at__isnull=False).count() == 3
    assert _dead(job_id) == 3

    resumed = api.post(f"/v1/jobs/{job_id}/resume")
    assert resumed.status_code == 200, resumed.json()
    assert (resumed.json()["state"], resumed.json()["pausedReason"]) == ("ACTIVE", None)

    wait_for(lambda: _dead(job_id) >= 4, timeout=20, what="a fire after the resume")
    again = wait_for(
        lambda: (body := api.get(f"/v1/jobs/{job_id}").json())["state"] == "PAUSED" and body,
        timeout=30,
        what="the job to be paused again",
    )
    assert again["pausedReason"] == "paused after 3 consecutive failed fires"
    assert _dead(job_id) == 6  # counted from zero after the resume: three more, not one
    states = wait_for(
        lambda: [r.json()["state"] for r in receiver.requests] if len(receiver.requests) >= 3 else None,
        timeout=20,
        what="the alert to resolve at the resume and fire again",
    )
    assert states == ["FIRING", "RESOLVED", "FIRING"]
