"""200 simultaneous posts of one event under one Idempotency-Key (threads, each with its own
database connection, real commits): exactly one event, one run per matching job, and every
request answers the same."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from events.models import Event
from events.tests.factories import event_job, workflow_event_job
from executions.models import Execution, Run
from tenants.services import tenant_create, token_create

THREADS = 200
BODY = {"name": "invoice.paid", "payload": {"invoice": "in_42", "currency": "EUR"}}


@pytest.fixture
def wide_pool():
    """On PostgreSQL the process's connection pool is widened for the crowd (its default, 6, is a
    web process's share), so that dozens of the requests are in their transactions at once."""
    pool = connection.settings_dict.get("OPTIONS", {}).get("pool")
    if connection.vendor != "postgresql" or not isinstance(pool, dict):
        yield
        return
    saved = dict(pool)
    connection.close_pool()
    pool["max_size"] = 24
    pool["timeout"] = 60.0
    try:
        yield
    finally:
        connection.close_pool()
        pool.clear()
        pool.update(saved)


def post_concurrently(raw_token: str, path: str, body: dict, key: str, threads: int = THREADS) -> list:
    barrier = threading.Barrier(threads)
    responses: list = [None] * threads
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
            barrier.wait(timeout=60)
            responses[index] = client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=key)
        except BaseException as exc:  # surfaced in the test thread below
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in pool), "a request hung"
    assert not errors, errors
    return responses


@pytest.mark.django_db(transaction=True)
def test_200_concurrent_posts_with_one_key_start_each_matching_job_exactly_once(wide_pool):
    tenant = tenant_create(slug="acme")
    _, raw = token_create(tenant=tenant)
    plain = event_job(tenant, name="plain", event_filter={"currency": "EUR"})
    unfiltered = event_job(tenant, name="unfiltered")
    workflow = workflow_event_job(tenant, name="workflow")
    event_job(tenant, name="dollars", event_filter={"currency": "USD"})

    responses = post_concurrently(raw, "/v1/events", BODY, key="in_42-paid")

    assert {response.status_code for response in responses} == {202}, [r.content for r in responses][:3]
    bodies = [response.json() for response in responses]
    assert all(body == bodies[0] for body in bodies)
    event = Event.objects.get()
    assert bodies[0]["eventId"] == str(event.pk)
    assert bodies[0]["matched"] == 3
    # One execution per plain job, one per step of the workflow's one run: 4, and nothing else.
    assert Execution.objects.count() == 4 == len(bodies[0]["executionIds"])
    assert sorted(bodies[0]["executionIds"]) == sorted(str(pk) for pk in Execution.objects.values_list("pk", flat=True))
    assert Execution.objects.filter(job=plain).count() == Execution.objects.filter(job=unfiltered).count() == 1
    assert Run.objects.filter(job=workflow).count() == 1
    assert set(Execution.objects.values_list("event_id", flat=True)) == {event.pk}


@pytest.mark.django_db(transaction=True)
def test_racing_posts_of_two_bodies_under_one_key_make_one_event_and_conflicts(wide_pool):
    """When the racers disagree, one body wins; every request of the other body is a 409."""
    tenant = tenant_create(slug="acme")
    _, raw = token_create(tenant=tenant)
    event_job(tenant)
    barrier = threading.Barrier(20)
    results: list = [None] * 20

    def worker(index: int) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
            barrier.wait(timeout=30)
            body = {"name": "invoice.paid", "payload": {"variant": index % 2}}
            results[index] = (index % 2, client.post("/v1/events", body, format="json", HTTP_IDEMPOTENCY_KEY="k"))
        finally:
            connection.close()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)

    event = Event.objects.get()
    winner = event.payload["variant"]
    for variant, response in results:
        assert response.status_code == (202 if variant == winner else 409), (variant, response.content)
    assert Execution.objects.count() == 1
