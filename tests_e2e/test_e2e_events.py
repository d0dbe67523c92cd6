"""Events end to end, through real processes: an event posted to the API and a signed webhook
start the runs of the event jobs they match, which real workers run; the handler sees the event
(ctx.event), in a plain job and in every step of a workflow job."""

import json
import time
from datetime import timedelta

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from events.models import Event
from executions.models import Execution
from tenants.services import inbound_secret_ensure, token_create
from tenants.signing import SIGNATURE_HEADER, sign
from testing import handlers_for_tests  # noqa: F401  (the workers' test handlers, known to the API here too)
from testing.harness import wait_for

pytestmark = pytest.mark.e2e


def _client(tenant) -> APIClient:
    _, raw = token_create(tenant=tenant)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def _succeeded(ids):
    rows = list(Execution.objects.filter(pk__in=ids))
    return rows if len(rows) == len(ids) and all(row.state == "SUCCEEDED" for row in rows) else None


def test_an_event_runs_the_jobs_it_matches_and_their_handlers_see_it(live, tenant):
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    api = _client(tenant)
    plain = {"name": "on EUR", "type": "EVENT", "on": "invoice.paid", "filter": {"currency": "EUR"}}
    plain["target"] = {"handler": "test-event"}
    flow = {"name": "flow", "type": "EVENT", "on": "invoice.paid", "workflow": {"steps": [
        {"name": "first", "target": {"handler": "test-event"}},
        {"name": "second", "target": {"handler": "test-event"}, "dependsOn": ["first"]},
    ]}}  # fmt: skip
    other = {"name": "on USD", "type": "EVENT", "on": "invoice.paid", "filter": {"currency": "USD"}}
    other["target"] = {"handler": "noop"}
    for body in (plain, flow, other):
        assert api.post("/v1/jobs", body, format="json").status_code == 201

    answer = api.post(
        "/v1/events", {"name": "invoice.paid", "payload": {"currency": "EUR", "cents": 500}}, format="json"
    )

    assert answer.status_code == 202, answer.content
    accepted = answer.json()
    assert accepted["matched"] == 2 and len(accepted["executionIds"]) == 3  # the plain job's and two steps
    done = wait_for(lambda: _succeeded(accepted["executionIds"]), timeout=30, what="the event's runs")
    event = Event.objects.get(pk=accepted["eventId"])
    seen = {(row.step or "plain"): row.result["event"] for row in done}
    assert set(seen) == {"plain", "first", "second"}
    for told in seen.values():
        assert told["id"] == str(event.pk) and told["name"] == "invoice.paid"
        assert told["payload"] == {"currency": "EUR", "cents": 500}
        assert told["receivedAt"].endswith("Z")
    assert {row.origin for row in done} == {"EVENT"}


def test_a_signed_webhook_starts_the_run_and_a_badly_signed_one_nothing(live, tenant):
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    api = _client(tenant)
    body = {"name": "on upload", "type": "EVENT", "on": "file.uploaded", "target": {"handler": "test-event"}}
    assert api.post("/v1/jobs", body, format="json").status_code == 201
    with transaction.atomic():
        secret = inbound_secret_ensure(tenant=tenant)
    raw = json.dumps({"path": "/in/a.csv"}).encode()
    hook = APIClient()
    path = f"/v1/hooks/{tenant.slug}/file.uploaded"

    bad = hook.post(
        path, raw, content_type="application/json", **{_header(): sign("wrong-secret", int(time.time()), raw)}
    )
    good = hook.post(path, raw, content_type="application/json", **{_header(): sign(secret, int(time.time()), raw)})

    assert bad.status_code == 401 and Event.objects.count() == 1
    assert good.status_code == 202, good.content
    [execution_id] = good.json()["executionIds"]
    [done] = wait_for(lambda: _succeeded([execution_id]), timeout=30, what="the webhook's run")
    assert done.result["event"]["payload"] == {"path": "/in/a.csv"}
    assert done.result["event"]["name"] == "file.uploaded"


def _header() -> str:
    return "HTTP_" + SIGNATURE_HEADER.upper().replace("-", "_")


def test_ten_events_in_two_seconds_to_a_debounced_job_make_one_run_that_carries_the_last_and_the_count(live, tenant):
    live.worker(wait=False)
    live.dispatcher()
    live.ready()
    api = _client(tenant)
    body = {"name": "reindex", "type": "EVENT", "on": "doc.changed", "target": {"handler": "test-event"}}
    job = api.post("/v1/jobs", {**body, "debounceSec": 3}, format="json").json()

    ids = []
    for n in range(10):
        answer = api.post("/v1/events", {"name": "doc.changed", "payload": {"n": n}}, format="json")
        assert answer.status_code == 202, answer.content
        ids.append(answer.json()["eventId"])
        time.sleep(0.2)
    last = Event.objects.get(pk=ids[-1]).received_at

    done = wait_for(lambda: _succeeded(Event.objects.get(pk=ids[0]).execution_ids), timeout=30, what="the run")
    assert Execution.objects.filter(job_id=job["jobId"]).count() == 1
    (run,) = done
    assert {Event.objects.get(pk=pk).execution_ids[0] for pk in ids} == {str(run.pk)}
    assert run.started_at >= last + timedelta(seconds=3)  # quiet for 3 s after the last event
    told = run.result["event"]
    assert told["id"] == ids[-1] and told["payload"] == {"n": 9}
    assert told["debounced"] == {"count": 10, "eventIds": ids}
