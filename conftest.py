"""Shared fixtures. Tests run on PostgreSQL (DATABASE_URL); see README, "Running the tests"."""

import pytest
from rest_framework.test import APIClient

from tenants.services import tenant_create, token_create


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
