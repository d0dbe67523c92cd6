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


# --- Factories ------------------------------------------------------------------------------------
# Jobs are made through the service (as the API makes them), so each has its first execution.
# Executions are moved on through the state machine, never by writing `state` directly.


@pytest.fixture
def make_job():
    """make_job(tenant, type="CRON", schedule="0 * * * *", ...) -> Job, created by executions.scheduling."""
    from datetime import timedelta

    from django.utils import timezone

    from executions.scheduling import job_create

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
        else:
            fields.setdefault("schedule", "0 * * * *")
        return job_create(tenant=tenant, fields=fields, now=now).job

    return make


@pytest.fixture
def drive():
    """drive(execution, "DEAD") walks an execution along the state machine to a state and
    returns it refreshed. Paths: PENDING → QUEUED → RUNNING → SUCCEEDED | FAILED → DEAD,
    and PENDING → CANCELLED."""
    from datetime import timedelta

    from django.utils import timezone

    from executions.models import Execution
    from executions.states import ExecutionState as S
    from executions.states import transition

    def step(execution, source, target, **changes):
        moved = transition(execution_id=execution.pk, source=source, target=target, now=timezone.now(), **changes)
        assert moved, f"{execution.pk} did not move {source} → {target}"

    def go(execution, target: str) -> Execution:
        now = timezone.now()
        if target == S.CANCELLED:
            step(execution, S.PENDING, S.CANCELLED, finished_at=now)
            return Execution.objects.get(pk=execution.pk)
        step(
            execution,
            S.PENDING,
            S.QUEUED,
            queued_at=now,
            republish_at=now + timedelta(seconds=30),
        )
        if target == S.QUEUED:
            return Execution.objects.get(pk=execution.pk)
        step(
            execution,
            S.QUEUED,
            S.RUNNING,
            started_at=now,
            lease_expires_at=now + timedelta(seconds=30),
            worker_id="worker-1",
        )
        if target == S.RUNNING:
            pass
        elif target == S.SUCCEEDED:
            step(execution, S.RUNNING, S.SUCCEEDED, finished_at=now, result={"ok": True}, message="handler returned")
        elif target in (S.FAILED, S.DEAD):
            step(execution, S.RUNNING, S.FAILED, error="boom", message="handler raised")
            if target == S.DEAD:
                step(execution, S.FAILED, S.DEAD, finished_at=now, message="attempts exhausted")
        else:
            raise ValueError(f"drive() has no path to {target}")
        return Execution.objects.get(pk=execution.pk)

    return go
