"""The `http` handler signs its call with the tenant's signing secret and, for a day after a
rotation (`manage.py signing_secret SLUG --rotate`), with the previous one too: a receiver that
still has the old secret verifies, as does one that has the new (issue 31, item 14). The real
runner runs in-process."""

import time
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from tenants import signing
from tenants.models import SIGNING_ROTATION_GRACE
from tenants.services import signing_secret_rotate
from testing.steps import claim
from testing.webhooks import start_receiver
from worker import outcomes, runner

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver(settings):
    settings.TICKWORK_HTTP_ALLOW_PRIVATE = True
    found = start_receiver()
    yield found
    found.stop()


@pytest.fixture(autouse=True)
def _close_the_recorders_connection():
    yield
    if outcomes.OutcomeRecorder.current() is not None:
        # The recorder's thread keeps its own connection open; only that thread can close it.
        outcomes.OutcomeRecorder.of_process().submit(connections.close_all)
        assert outcomes.flush_outcomes(timeout=10)


def _call(tenant, make_job, url):
    make_job(tenant, run_at=timezone.now() - timedelta(seconds=1), handler="http", payload={"url": url})
    (sent,) = claim(timezone.now())
    assert runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token, defer_success=True)
    assert outcomes.flush_outcomes(timeout=10)


def _verifies(request, secret: str) -> bool:
    header = request.headers[signing.SIGNATURE_HEADER]
    return signing.verify(header, request.body, secrets=[secret], now=time.time())


def test_a_call_is_signed_with_the_new_and_the_old_secret_while_the_rotation_settles(tenant, make_job, receiver):
    old = tenant.signing_secret
    new = signing_secret_rotate(tenant=tenant, now=timezone.now())

    _call(tenant, make_job, receiver.url)

    (request,) = receiver.requests
    assert request.headers[signing.SIGNATURE_HEADER].count("v1=") == 2
    assert _verifies(request, old) and _verifies(request, new)


def test_after_the_day_a_call_is_signed_with_the_new_secret_alone(tenant, make_job, receiver):
    old = tenant.signing_secret
    new = signing_secret_rotate(tenant=tenant, now=timezone.now() - SIGNING_ROTATION_GRACE - timedelta(seconds=5))

    _call(tenant, make_job, receiver.url)

    (request,) = receiver.requests
    assert _verifies(request, new) and not _verifies(request, old)
