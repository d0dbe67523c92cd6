"""The web role's HTTP side as the README starts it in production: gunicorn with
scheduler_project/gunicorn.conf.py serving scheduler_project.wsgi. It serves the API, the
dashboard's pages, the admin and /metrics as daphne does (the live views stay daphne's), and
behind a proxy takes the client's address from the proxy's X-Forwarded-For entry."""

import json

import pytest
import requests

from audit.models import AuditEntry
from jobs.models import Job
from jobs.versions import version_latest
from tenants.services import token_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_gunicorn_serves_the_api_the_dashboard_the_admin_and_metrics(web_server, tenant):
    _, token = token_create(tenant=tenant)
    base = f"http://127.0.0.1:{web_server('gunicorn').port}"
    auth = {"Authorization": f"Bearer {token}"}
    body = {"name": "wsgi", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}

    created = requests.post(f"{base}/v1/jobs", json=body, headers=auth, timeout=30)
    assert created.status_code == 201, created.text
    job = Job.objects.get(pk=created.json()["jobId"], tenant=tenant)
    assert created.json()["lastRunState"] is None
    assert version_latest(job=job).number == 1
    assert requests.get(f"{base}/v1/jobs/{job.pk}", headers=auth, timeout=30).json()["name"] == "wsgi"

    bulk = requests.post(f"{base}/v1/jobs/bulk", json={"jobs": [body, {**body, "name": "wsgi 2"}]}, headers=auth)
    assert bulk.status_code == 201, bulk.text
    assert [made["name"] for made in bulk.json()["jobs"]] == ["wsgi", "wsgi 2"]

    nul = b'{"name": "x\\u0000"}'
    bad = requests.post(f"{base}/v1/jobs", data=nul, headers={**auth, "Content-Type": "application/json"}, timeout=30)
    assert bad.status_code == 400 and "name" in bad.json()

    assert requests.get(f"{base}/v1/health", timeout=30).status_code in (200, 503)  # no dispatcher runs here
    login = requests.get(f"{base}/dashboard/", timeout=30)
    assert login.status_code == 200 and "/accounts/login/" in login.url
    assert "Content-Security-Policy" in login.headers
    assert requests.get(f"{base}/admin/login/", timeout=30).status_code == 200
    assert requests.get(f"{base}/metrics", timeout=30).status_code == 401
    assert requests.get(f"{base}/static/dashboard/app.css", timeout=30).status_code == 200


@pytest.mark.parametrize("trusted", [True, False])
def test_gunicorn_takes_the_address_the_proxy_appended_only_when_told(web_server, tenant, trusted):
    _, token = token_create(tenant=tenant)
    server = web_server("gunicorn", **({"TICKWORK_PROXY_HEADERS": "true"} if trusted else {}))
    response = requests.post(
        f"http://127.0.0.1:{server.port}/v1/jobs",
        data=json.dumps({"name": "proxied", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "X-Forwarded-For": "10.9.9.9, 203.0.113.7",  # the client's claim, then the proxy's entry
        },
        timeout=30,
    )
    assert response.status_code == 201, response.text
    row = AuditEntry.objects.get(action="job.create", request_id=response.headers["X-Request-Id"])
    assert row.source_ip == ("203.0.113.7" if trusted else "127.0.0.1")
