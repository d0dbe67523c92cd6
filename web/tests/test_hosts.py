"""The Host header (web/hosts.py): a load balancer's health probe names the backend by its address,
which is no allowed host; the health check answers it, every other path still refuses it, and the
refusal is logged as one line."""

import logging

import pytest

pytestmark = pytest.mark.django_db

BACKEND = "10.0.0.5:8000"  # how a load balancer addresses a backend


@pytest.fixture(autouse=True)
def _served_as_one_host(settings):
    settings.ALLOWED_HOSTS = ["tickwork.example.com"]


def test_the_health_check_answers_a_probe_that_names_the_backends_address(client):
    """It answered 400 DisallowedHost, and the balancer took every backend out of service."""
    response = client.get("/v1/health", HTTP_HOST=BACKEND)
    assert response.status_code in (200, 503)  # no dispatcher runs here: 503 naming it
    assert response.json()["database"] == "ok"
    assert response.json()["status"] in ("ok", "degraded", "unavailable")


@pytest.mark.parametrize("path", ["/v1/", "/v1/jobs", "/v1/health/", "/admin/login/", "/dashboard/", "/metrics"])
def test_every_other_path_still_refuses_a_host_not_allowed(client, path):
    assert client.get(path, HTTP_HOST=BACKEND).status_code == 400
    assert client.get("/v1/health", HTTP_HOST="tickwork.example.com").status_code in (200, 503)


def test_a_refused_host_is_one_warning_line_without_a_traceback(client, caplog):
    """Django logged it as an ERROR with the whole stack: a page of log per scanner's request."""
    with caplog.at_level(logging.INFO, logger="django.security.DisallowedHost"):
        client.get("/v1/jobs", HTTP_HOST=BACKEND)
    [record] = [r for r in caplog.records if r.name == "django.security.DisallowedHost"]
    assert record.levelname == "WARNING"
    assert record.exc_info is None and "Traceback" not in caplog.text
    assert "Invalid HTTP_HOST header: '10.0.0.5:8000'" in record.getMessage()
