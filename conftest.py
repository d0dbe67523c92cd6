"""Shared fixtures. Tests run on PostgreSQL (DATABASE_URL), then again on the embedded default (SQLite);
see README, "Running the tests"."""

import pytest
from rest_framework.test import APIClient

from tenants.services import tenant_create, token_create

# The end-to-end fixtures (`live`: real workers, dispatchers and sweepers) and their hooks.
pytest_plugins = ["testing.fixtures"]


@pytest.fixture
def tenant(db):
    return tenant_create(slug="acme")


@pytest.fixture
def other_tenant(db):
    return tenant_create(slug="globex")


def _client_for(tenant) -> APIClient:
    _, raw = token_create(tenant=tenant)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def api(tenant) -> APIClient:
    return _client_for(tenant)


@pytest.fixture
def other_api(other_tenant) -> APIClient:
    return _client_for(other_tenant)


@pytest.fixture
def exact_admission(settings):
    """A pool admits exactly its slots: no buffer on the broker, so each claim shows its choice."""
    settings.TICKWORK_ADMIT_HEADROOM = 1.0
    settings.TICKWORK_ADMIT_MAX_BUFFER = 0


# --- Factories ------------------------------------------------------------------------------------
# Jobs are made through the service (as the API makes them), so each has its first execution.
# Executions are moved on through the state machine, never by writing `state` directly.


@pytest.fixture
def make_job():
    """make_job(tenant, type="CRON", schedule="0 * * * *", ...) -> Job, created by scheduling.job_creation."""
    from datetime import timedelta

    from django.utils import timezone

    from scheduling.job_creation import job_create

    def make(tenant, **fields):
        now = fields.pop("now", None) or timezone.now()
        kind = fields.setdefault("type", "ONCE")
        fields.setdefault("name", f"{kind.lower()} job")
        fields.setdefault("pool", "default")
        fields.setdefault("handler", "noop")
        if kind == "ONCE":
            fields.setdefault("run_at", now + timedelta(hours=1))
        elif kind == "DELAYED":
            fields.setdefault("delay_sec", 3600)
        elif kind == "INTERVAL":
            fields.setdefault("every_sec", 3600)
        else:
            fields.setdefault("schedule", "0 * * * *")
        return job_create(tenant=tenant, fields=fields, now=now).job

    return make


@pytest.fixture
def drive():
    """drive(execution, "DEAD") walks an execution along the state machine, through its named
    transitions, to a state and returns it refreshed. Paths: PENDING → QUEUED → RUNNING →
    SUCCEEDED | FAILED → DEAD, and PENDING → CANCELLED."""
    from datetime import timedelta

    from django.utils import timezone

    from executions import transitions
    from executions.models import Execution
    from executions.states import ExecutionState as S

    def go(execution, target: str) -> Execution:
        now = timezone.now()
        pk = execution.pk
        if target == S.CANCELLED:
            assert transitions.cancel(execution_id=pk, now=now, reason="cancelled"), f"{pk} was not cancelled"
            return Execution.objects.get(pk=pk)
        assert transitions.queue_many([pk], now=now, publish_grace=timedelta(seconds=30)), f"{pk} was not queued"
        if target == S.QUEUED:
            return Execution.objects.get(pk=pk)
        token = Execution.objects.get(pk=pk).lease_token
        started = transitions.start(
            execution_id=pk, lease_token=token, now=now, worker_id="worker-1", lease=timedelta(seconds=30)
        )
        assert started, f"{pk} did not start"
        if target == S.RUNNING:
            pass
        elif target == S.SUCCEEDED:
            assert transitions.succeed(execution_id=pk, lease_token=token, now=now, result={"ok": True})
        elif target in (S.FAILED, S.DEAD):
            assert transitions.fail(execution_id=pk, lease_token=token, now=now, error="boom", traceback="")
            if target == S.DEAD:
                assert transitions.discard(execution_id=pk, source=S.FAILED, now=now, message="attempts exhausted")
        else:
            raise ValueError(f"drive() has no path to {target}")
        return Execution.objects.get(pk=execution.pk)

    return go


# --- Layers -----------------------------------------------------------------------------------------
# Every test is in one layer, decided here rather than by hand (README, "Running the tests"):
# e2e, browser and perf are marked by their modules; of the rest, a test that reaches the database
# (a db fixture or marker) or is marked `integration` (it talks to Redis or RabbitMQ) is an
# integration test, and every other one is a unit test, which `make test-unit` runs with no server.
_OWN_LAYERS = ("e2e", "browser", "perf", "integration")
# (pytest-django's autouse fixtures ask for django_db_setup in every test, so it says nothing.)
_DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "admin_user",
    "admin_client",
    "live_server",
    "live",
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.get_closest_marker(layer) for layer in _OWN_LAYERS):
            continue
        touches_database = item.get_closest_marker("django_db") or _DATABASE_FIXTURES & set(item.fixturenames)
        item.add_marker(pytest.mark.integration if touches_database else pytest.mark.unit)
