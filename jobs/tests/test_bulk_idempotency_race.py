"""Concurrent bulk creates with one Idempotency-Key make exactly one set of jobs (real commits;
on PostgreSQL, real concurrent transactions)."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from executions.models import Execution
from jobs.models import Job
from tenants.services import tenant_create, token_create
from testing import harness

BATCH = [
    {
        "name": f"invoice {index}",
        "type": "DELAYED",
        "delaySec": 3600,
        "target": {"handler": "noop"},
        "payload": {"invoice": index},
    }
    for index in range(200)
]


def post_concurrently(raw_token: str, bodies: list[dict], key: str) -> list:
    """POST each of `bodies` to /v1/jobs/bulk from its own thread, all at once, under `key`."""
    barrier = threading.Barrier(len(bodies))
    responses: list = [None] * len(bodies)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
            barrier.wait(timeout=30)
            responses[index] = client.post("/v1/jobs/bulk", bodies[index], format="json", HTTP_IDEMPOTENCY_KEY=key)
        except BaseException as exc:  # surfaced in the test thread below
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in pool), "a request hung"
    assert not errors, errors
    return responses


def job_ids(response) -> list[str]:
    return [job["jobId"] for job in response.json()["jobs"]]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("max_active_jobs", [None, 300], ids=["no quota", "under a quota that fits one batch"])
def test_concurrent_identical_batches_with_one_key_create_one_set_of_jobs(max_active_jobs):
    """Four simultaneous identical batches under one key: one 201 and three 200, all answering
    the same jobs in the same order; exactly one job, execution and event per item exist. Under
    an active-job limit with room for one batch only, the late ones are replays (200), not 429."""
    tenant = tenant_create(slug="acme", max_active_jobs=max_active_jobs)
    _, raw = token_create(tenant=tenant)

    responses = post_concurrently(raw, [{"jobs": BATCH}] * 4, key="import-2026-11")

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200, 200, 200, 201], [r.content[:300] for r in responses if r.status_code >= 300]
    assert len({tuple(job_ids(response)) for response in responses}) == 1
    assert Job.objects.count() == len(BATCH)
    assert Execution.objects.count() == len(BATCH)
    assert harness.events_count() == len(BATCH)
    first = responses[0].json()["jobs"]
    assert [job["payload"]["invoice"] for job in first] == list(range(len(BATCH)))


@pytest.mark.django_db(transaction=True)
def test_concurrent_different_batches_under_one_key_make_one_set_and_conflicts():
    """Racers that disagree on the body: one batch wins (201), each other body gets 409, and only
    the winner's jobs exist."""
    tenant = tenant_create(slug="acme")
    _, raw = token_create(tenant=tenant)
    bodies = [{"jobs": [{**item, "name": f"{item['name']} v{variant}"} for item in BATCH]} for variant in range(4)]

    responses = post_concurrently(raw, bodies, key="k")

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [201, 409, 409, 409], [r.content[:300] for r in responses]
    (winner,) = [index for index, response in enumerate(responses) if response.status_code == 201]
    assert sorted(Job.objects.values_list("name", flat=True)) == sorted(item["name"] for item in bodies[winner]["jobs"])
    assert Execution.objects.count() == len(BATCH)
