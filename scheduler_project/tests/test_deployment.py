"""Deployment hardening: `check --deploy` with the README's production variables, the
Content-Security-Policy, throttled failed logins, and Retry-After on every 429."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

ROOT = Path(settings.BASE_DIR)
PASSWORD = "correct horse battery staple"


def _production_env() -> dict[str, str]:
    """The variables of the README's production block, with a real key in place of the hint."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- production-env -->\s*```ini\n(.*?)```", readme, re.S).group(1)
    env = dict(line.split("=", 1) for line in block.strip().splitlines())
    assert env["DJANGO_SECRET_KEY"].startswith("<")
    env["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)
    return env


def test_defect9_check_deploy_is_clean_with_the_documented_production_variables(tmp_path):
    """`manage.py check --deploy --fail-level WARNING` passes with the README's production
    variables (it warned about secure cookies, HSTS, SSL redirect whatever one set)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(_production_env(), TICKWORK_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="scheduler_project.settings")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/", "/v1/docs", "/v1/health"])
def test_defect9_every_page_has_a_content_security_policy(client, path):
    """Pages carry a Content-Security-Policy that admits only this site's scripts."""
    response = client.get(path)
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "object-src 'none'" in policy


@pytest.mark.django_db
def test_defect9_api_docs_start_without_an_inline_script(client):
    """Swagger UI's start-up script is served as a file, which script-src 'self' allows."""
    page = client.get("/v1/docs").content.decode()
    assert re.search(r"<script>\s*\S", page) is None
    script = client.get("/v1/docs?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_defect9_repeated_failed_logins_are_refused_with_429_and_retry_after(client, path, settings):
    """At the TICKWORK_LOGIN_FAILURE_LIMIT-th failure the login form answers 429 with Retry-After,
    and so it does, even to the right password, until the lock-out is over (every try was
    checked before)."""
    settings.AXES_FAILURE_LIMIT = 3
    get_user_model().objects.create_user("op", password=PASSWORD, is_staff=True)
    for _ in range(2):
        assert client.post(path, {"username": "op", "password": "guess"}).status_code == 200
    refused = client.post(path, {"username": "op", "password": "guess"})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) == 15 * 60
    assert client.post(path, {"username": "op", "password": PASSWORD}).status_code == 429


@pytest.mark.django_db
def test_login_throttle_locks_one_user_name_not_the_address(client, settings):
    """The lock is on one user name from one address: another operator still gets in."""
    settings.AXES_FAILURE_LIMIT = 3
    get_user_model().objects.create_user("other", password=PASSWORD, is_staff=True)
    for _ in range(3):
        client.post("/admin/login/", {"username": "op", "password": "guess"})
    assert client.post("/admin/login/", {"username": "other", "password": PASSWORD}).status_code == 302


def test_defect9_submit_rate_429_says_when_to_retry(api, tenant):
    """A create over the tenant's submit rate answers 429 with Retry-After: the seconds left in
    the rate's one-minute window."""
    tenant.submit_rate_per_minute = 1
    tenant.save()
    job = {"name": "j", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}
    assert api.post("/v1/jobs", job, format="json").status_code == 201
    refused = api.post("/v1/jobs", job, format="json")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
