"""What the schema test's generated requests meet: a tenant with jobs of every type and objects in
each state the API reports, so that a request naming an id finds a real one (through the schema's
links and schemathesis's pool of ids read from earlier answers) rather than a 404 every time.

Made through the API (in process, with the tenant's token) and the named transitions, before the
roles start, so that nothing races the seeding; the dispatcher and sweeper then move what is due."""

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework.test import APIClient

from executions import transitions
from executions.models import Execution
from executions.states import ExecutionState as S
from pools import rate_limits
from testing.steps import alerter_pass
from tests_schema.hooks import RATE_LIMIT  # the limit the generated valid bodies name

TARGET = {"handler": "noop"}
STEPS = [
    {"name": "extract", "target": TARGET, "payload": {"day": 1}},
    {"name": "load", "target": TARGET, "dependsOn": ["extract"], "retryPolicy": {"maxAttempts": 2}},
]
# One job of each type, plain and workflow: the bodies a client sends.
JOBS: dict[str, dict[str, Any]] = {
    "once": {"type": "ONCE", "runAt": "2031-01-01T09:00:00Z", "target": TARGET},
    "delayed": {"type": "DELAYED", "delaySec": 86400, "target": {"handler": "sleep"}, "payload": {"seconds": 1}},
    "cron": {"type": "CRON", "schedule": "*/5 * * * *", "timezone": "Europe/London", "target": TARGET},
    "hashed cron": {"type": "CRON", "schedule": "H H(0-5) * * *", "target": TARGET, "priority": "HIGH"},
    "interval": {"type": "INTERVAL", "everySec": 900, "target": {**TARGET, "rateLimit": RATE_LIMIT}},
    "event": {"type": "EVENT", "on": "invoice.paid", "filter": {"currency": "EUR"}, "target": TARGET},
    "cron workflow": {"type": "CRON", "schedule": "0 2 * * *", "workflow": {"steps": STEPS}},
    "event workflow": {"type": "EVENT", "on": "order.created", "workflow": {"steps": STEPS}},
    "paused": {"type": "CRON", "schedule": "0 * * * *", "target": TARGET},
    "cancelled": {"type": "DELAYED", "delaySec": 3600, "target": TARGET},
}
# One-off jobs whose first execution is walked to a state (the dead one makes a dead-letter group).
STATES = (S.SUCCEEDED, S.DEAD, S.CANCELLED, S.FAILED, S.RUNNING, S.QUEUED)


def seed(token: str) -> dict[str, list[str]]:
    """Make the objects in the token's tenant; returns their ids by the API's name for them."""
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    made: dict[str, list[str]] = {"job_id": [], "execution_id": [], "run_id": [], "event_id": [], "rule_id": []}

    def post(path: str, body: dict[str, Any] | None = None, status: int = 201) -> dict[str, Any]:
        response = api.post(path, body, format="json")
        assert response.status_code == status, (path, body, response.content)
        return response.json()

    rate_limits.define(name=RATE_LIMIT, per_second=100)
    jobs = {name: post("/v1/jobs", {"name": f"seeded {name}", **body}) for name, body in JOBS.items()}
    made["job_id"] += [job["jobId"] for job in jobs.values()]
    cron_id = jobs["cron"]["jobId"]
    assert api.patch(f"/v1/jobs/{cron_id}", {"schedule": "*/10 * * * *"}, format="json").status_code == 200
    post(f"/v1/jobs/{jobs['paused']['jobId']}/pause", status=200)
    assert api.delete(f"/v1/jobs/{jobs['cancelled']['jobId']}").status_code == 200
    made["execution_id"].append(post(f"/v1/jobs/{cron_id}/trigger", status=200)["executionId"])
    made["execution_id"].append(post(f"/v1/jobs/{jobs['cron workflow']['jobId']}/trigger", status=200)["executionId"])

    now = timezone.now()
    for state in STATES:
        job = post("/v1/jobs", {"name": f"seeded {state.lower()}", "type": "DELAYED", "delaySec": 0, "target": TARGET})
        execution = Execution.objects.get(job_id=job["jobId"])
        _walk(execution.pk, state, now=now)
        made["job_id"].append(job["jobId"])
        made["execution_id"].append(str(execution.pk))

    event = post("/v1/events", {"name": "invoice.paid", "payload": {"currency": "EUR", "amount": 12}}, status=202)
    post("/v1/events", {"name": "order.created", "payload": {"order": 7}}, status=202)
    made["event_id"].append(event["eventId"])
    made["run_id"] += [
        run["runId"] for run in api.get(f"/v1/jobs/{jobs['cron workflow']['jobId']}/runs").json()["results"]
    ]
    rule = {
        "name": "no workers",
        "kind": "NO_WORKERS",
        "pool": "default",
        "channels": [{"type": "email", "to": "ops@example.com"}],
    }
    made["rule_id"].append(post("/v1/alerts/rules", rule)["ruleId"])
    alerter_pass(now)  # no worker serves `default`: the rule fires, and GET /v1/alerts has one
    return made


def _walk(pk, state: str, *, now) -> None:
    """PENDING → `state` through the named transitions, as a dispatcher and a worker would."""
    if state == S.CANCELLED:
        assert transitions.cancel(execution_id=pk, now=now, reason="cancelled by the seed")
        return
    assert transitions.queue_many([pk], now=now, publish_grace=timedelta(hours=1))
    if state == S.QUEUED:
        return
    token = Execution.objects.get(pk=pk).lease_token
    assert transitions.start(execution_id=pk, lease_token=token, now=now, worker_id="seed:1", lease=timedelta(hours=1))
    if state == S.SUCCEEDED:
        assert transitions.succeed(execution_id=pk, lease_token=token, now=now, result={"ok": True})
    elif state in (S.FAILED, S.DEAD):
        error = "order 1000 failed for user 'u0'"
        assert transitions.fail(execution_id=pk, lease_token=token, now=now, error=error, traceback="")
        if state == S.DEAD:
            assert transitions.discard(execution_id=pk, source=S.FAILED, now=now, message="attempts exhausted")
