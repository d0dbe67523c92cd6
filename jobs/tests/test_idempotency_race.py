"""Concurrent creates with one Idempotency-Key make exactly one job (real PostgreSQL, real commits)."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from executions.models import Execution
from jobs.models import Job
from tenants.services import tenant_create, token_create

THREADS = 20
BODY = {
    "name": "charge customer 42",
    "type": "DELAYED",
    "delaySec": 3600,
    "target": {"handler": "noop"},
    "payload": {"customer": 42, "amountCents": 1999},
}


def post_concurrently(raw_token: str, body: dict, key: str, threads: int = THREADS) -> list:
    """POST `body` from `threads` threads at once, each with its own client and connection."""
    barrier = threading.Barrier(threads)
    responses: list = [None] * threads
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
            barrier.wait(timeout=30)
            responses[index] = client.post("/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY=key)
        except BaseException as exc:  # surfaced in the test thread below
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in pool), "a request hung"
    assert not errors, errors
    return responses


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_with_one_key_create_exactly_one_job():
    """Twenty simultaneous POSTs with the same body and key: one 201 and nineteen 200, all naming
    the same job, and exactly one job and one execution exist."""
    tenant = tenant_create(slug="acme")
    _, raw = token_create(tenant=tenant)

    responses = post_concurrently(raw, BODY, key="charge-42")

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] * (THREADS - 1) + [201], [r.content for r in responses if r.status_code >= 300]
    assert len({response.json()["jobId"] for response in responses}) == 1
    assert Job.objects.count() == 1
    assert Execution.objects.count() == 1
    job = Job.objects.get()
    assert str(job.pk) == responses[0].json()["jobId"]
    assert job.idempotency_key == "charge-42"


@pytest.mark.django_db(transaction=True)
def test_after_the_race_the_same_key_with_another_body_is_409():
    """Once the key is taken, a request with a different body under it is a 409 conflict, and
    creates nothing; a replay of the original body still answers 200 with the job."""
    tenant = tenant_create(slug="acme")
    _, raw = token_create(tenant=tenant)
    post_concurrently(raw, BODY, key="charge-42", threads=5)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    conflict = client.post(
        "/v1/jobs", {**BODY, "payload": {"customer": 43}}, format="json", HTTP_IDEMPOTENCY_KEY="charge-42"
    )
    replay = client.post("/v1/jobs", BODY, format="json", HTTP_IDEMPOTENCY_KEY="charge-42")

    assert conflict.status_code == 409
    assert conflict.json()["field"] == "Idempotency-Key"
    assert replay.status_code == 200
    assert (Job.objects.count(), Execution.objects.count()) == (1, 1)


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_with_different_bodies_under_one_key_make_one_job_and_conflicts():
    """When the racers disagree on the body, one wins with 201 and every other body gets 409 (or 200
    if it happens to be the winner's)."""
    tenant = tenant_create(slug="acme")
    _, raw = token_create(tenant=tenant)
    barrier = threading.Barrier(10)
    results: list = [None] * 10

    def worker(index: int) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
            barrier.wait(timeout=30)
            body = {**BODY, "payload": {"customer": index % 2}}
            results[index] = (index % 2, client.post("/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="k"))
        finally:
            connection.close()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)

    winners = [variant for variant, response in results if response.status_code == 201]
    assert len(winners) == 1
    for variant, response in results:
        expected = {201, 200} if variant == winners[0] else {409}
        assert response.status_code in expected, (variant, response.status_code, response.content)
    assert (Job.objects.count(), Execution.objects.count()) == (1, 1)
