"""Bearer-token authentication, and the create_tenant / create_token bootstrap commands."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import ApiToken, Tenant
from tenants.services import token_create

pytestmark = pytest.mark.django_db

PROTECTED = [
    ("get", "/v1/jobs"),
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs/00000000-0000-0000-0000-000000000000"),
    ("patch", "/v1/jobs/00000000-0000-0000-0000-000000000000"),
    ("delete", "/v1/jobs/00000000-0000-0000-0000-000000000000"),
    ("post", "/v1/jobs/00000000-0000-0000-0000-000000000000/pause"),
    ("get", "/v1/jobs/00000000-0000-0000-0000-000000000000/executions"),
    ("get", "/v1/executions"),
    ("get", "/v1/executions/00000000-0000-0000-0000-000000000000"),
    ("post", "/v1/executions/00000000-0000-0000-0000-000000000000/cancel"),
    ("post", "/v1/executions/00000000-0000-0000-0000-000000000000/retry"),
]


def client_with(header: str | None) -> APIClient:
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    return client


# --- authentication ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_no_token_is_401_with_a_bearer_challenge(db, method, path):
    """Every tenant endpoint refuses an anonymous caller with 401 and `WWW-Authenticate: Bearer`."""
    response = getattr(client_with(None), method)(path)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["detail"]


@pytest.mark.parametrize(
    "header",
    ["Bearer tw_not-a-real-token", "Bearer", "Bearer two parts", "Token tw_abc", "Basic dXNlcjpwYXNz", "  "],
    ids=["unknown-token", "no-token", "three-parts", "other-scheme", "basic", "blank"],
)
def test_a_bad_authorization_header_is_401(tenant, header):
    """An unknown token, a malformed header or another scheme is 401, never 500 or a tenant's data."""
    response = client_with(header).get("/v1/jobs")

    assert response.status_code == 401


def test_a_revoked_token_is_401(tenant):
    """A token stops working the moment it is revoked."""
    token, raw = token_create(tenant=tenant)
    client = client_with(f"Bearer {raw}")
    assert client.get("/v1/jobs").status_code == 200

    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())

    assert client.get("/v1/jobs").status_code == 401


def test_a_valid_token_is_200_and_marks_the_token_used(tenant):
    """A good token is accepted, in any letter case of the scheme, and its last use is recorded."""
    token, raw = token_create(tenant=tenant)
    assert token.last_used_at is None

    assert client_with(f"Bearer {raw}").get("/v1/jobs").status_code == 200
    assert client_with(f"bearer {raw}").get("/v1/jobs").status_code == 200

    token.refresh_from_db()
    assert token.last_used_at is not None


def test_the_token_is_not_the_token_of_another_tenant(tenant, other_tenant):
    """A token acts for its own tenant: what it creates belongs to that tenant."""
    _, raw = token_create(tenant=other_tenant)

    response = client_with(f"Bearer {raw}").post(
        "/v1/jobs",
        {"name": "x", "type": "DELAYED", "delaySec": 5, "target": {"handler": "noop"}},
        format="json",
    )

    assert response.status_code == 201
    assert response.json()["tenant"] == "globex"


@pytest.mark.parametrize("path", ["/v1/health", "/v1/schema", "/v1/docs"])
def test_health_schema_and_docs_need_no_token(db, path):
    """Probes and API docs are open. (Health answers 503 here: no dispatcher runs in this test;
    web/tests/test_api_service_endpoints.py has its 200.)"""
    assert client_with(None).get(path).status_code == (503 if path == "/v1/health" else 200)


# --- create_tenant ----------------------------------------------------------------------------------


def test_create_tenant_creates_it():
    """`create_tenant SLUG [--name NAME]` makes the tenant and says so."""
    out = StringIO()

    call_command("create_tenant", "initech", "--name", "Initech Corp", stdout=out)

    tenant = Tenant.objects.get(slug="initech")
    assert tenant.name == "Initech Corp"
    assert "initech" in out.getvalue()


def test_create_tenant_twice_is_a_command_error(tenant):
    """An existing slug is refused with a message, not a traceback."""
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_tenant", tenant.slug, stdout=StringIO())
    assert Tenant.objects.filter(slug=tenant.slug).count() == 1


@pytest.mark.parametrize("slug", ["Has Spaces", "semi;colon", ""])
def test_create_tenant_with_a_bad_slug_is_a_command_error(db, slug):
    """A slug is letters, digits, '-' and '_'; anything else is refused before it is stored."""
    with pytest.raises(CommandError, match="not a slug"):
        call_command("create_tenant", slug, stdout=StringIO())
    assert Tenant.objects.count() == 0


# --- create_token -----------------------------------------------------------------------------------


def test_create_token_prints_a_working_token_once_and_stores_only_its_hash(tenant):
    """`create_token SLUG` prints the raw token (and nothing else); the database holds its SHA-256
    and a short prefix, never the token; the printed token authenticates as the tenant."""
    out = StringIO()

    call_command("create_token", tenant.slug, stdout=out)

    raw = out.getvalue().strip()
    assert raw.startswith(ApiToken.PREFIX) and len(raw) > 30
    assert "\n" not in raw
    token = ApiToken.objects.get(tenant=tenant)
    assert token.key_hash == ApiToken.hash_key(raw)
    assert raw.startswith(token.key_prefix) and len(token.key_prefix) < len(raw) // 2
    stored = [str(value) for value in ApiToken.objects.filter(pk=token.pk).values().get().values()]
    assert raw not in stored
    assert client_with(f"Bearer {raw}").get("/v1/jobs").status_code == 200


def test_create_token_makes_a_new_token_each_time(tenant):
    """Each run issues a distinct token; the earlier ones keep working."""
    first, second = StringIO(), StringIO()

    call_command("create_token", tenant.slug, stdout=first)
    call_command("create_token", tenant.slug, stdout=second)

    assert first.getvalue() != second.getvalue()
    assert ApiToken.objects.filter(tenant=tenant).count() == 2
    assert client_with(f"Bearer {first.getvalue().strip()}").get("/v1/jobs").status_code == 200


def test_create_token_for_an_unknown_slug_is_a_command_error(db):
    """An unknown tenant is refused, and no token is made."""
    with pytest.raises(CommandError, match="no tenant 'nobody'"):
        call_command("create_token", "nobody", stdout=StringIO())
    assert ApiToken.objects.count() == 0
