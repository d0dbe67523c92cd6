"""The dashboard's job form under issue #10's bad input: the same refusals as the API, shown on
the page next to the field, never a 500 and never a half-written job."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job

MAX_DEPTH = 32  # the documented nesting limit (README, "The API")

pytestmark = pytest.mark.django_db


def _job_form(**overrides) -> dict:
    data = {
        "name": "nightly export",
        "type": "ONCE",
        "runAt": (timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "timezone": "UTC",
        "handler": "noop",
        "payload": "{}",
        "maxAttempts": "3",
        "backoff": "EXPONENTIAL",
        "initialDelayMs": "1000",
        "maxDelayMs": "60000",
        "jitter": ["false", "true"],
        "timeoutSec": "600",
        "priority": "NORMAL",
        "misfirePolicy": "RUN_ONCE",
        "concurrencyPolicy": "ALLOW",
        "tenant": "acme",
    }
    data.update(overrides)
    return data


BAD_PAYLOADS = [
    pytest.param('{"note": "a\\u0000b"}', "NUL character", id="nul"),
    pytest.param('{"note": "\\ud800"}', "lone surrogate", id="lone-surrogate"),
    pytest.param('{"a\\u0000": 1}', "NUL character", id="nul-in-key"),
    pytest.param('{"a": ' * 5000 + "1" + "}" * 5000, f"nested deeper than {MAX_DEPTH} levels", id="deep"),
    pytest.param('{"big": 1e400}', "too large to store", id="infinite-number"),
]


@pytest.mark.parametrize(("payload", "message"), BAD_PAYLOADS)
def test_defect3_the_create_form_refuses_an_unstorable_payload_on_the_field(member_client, payload, message):
    response = member_client.post("/dashboard/jobs/new", _job_form(payload=payload))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-error-for="payload"' in html and message in html
    assert not Job.objects.exists()


@pytest.mark.parametrize(("payload", "message"), BAD_PAYLOADS)
def test_defect3_the_edit_form_refuses_an_unstorable_payload_and_changes_nothing(
    member_client, tenant, make_job, payload, message
):
    job = make_job(tenant, payload={"kept": True})
    form = member_client.get(f"/dashboard/jobs/{job.pk}/edit").context["values"]
    response = member_client.post(f"/dashboard/jobs/{job.pk}/edit", {**form, "payload": payload})
    assert response.status_code == 200
    assert message in response.content.decode()
    job.refresh_from_db()
    assert job.payload == {"kept": True}


def test_defect3_a_nul_in_the_name_is_a_field_error(member_client):
    response = member_client.post("/dashboard/jobs/new", _job_form(name="a\x00b"))
    assert response.status_code == 200
    assert 'data-error-for="name"' in response.content.decode()
    assert not Job.objects.exists()


def test_defect11_the_form_checks_the_payload_against_the_handler(member_client):
    response = member_client.post("/dashboard/jobs/new", _job_form(handler="sleep", payload='{"seconds": "abc"}'))
    html = response.content.decode()
    assert 'data-error-for="payload"' in html
    assert "seconds: A valid number is required." in html
    assert not Job.objects.exists()


def test_defect11_the_edit_form_checks_a_new_handler_against_the_payload(member_client, tenant, make_job):
    job = make_job(tenant, handler="noop", payload={})
    form = member_client.get(f"/dashboard/jobs/{job.pk}/edit").context["values"]
    response = member_client.post(f"/dashboard/jobs/{job.pk}/edit", {**form, "handler": "http"})
    assert "url: This field is required." in response.content.decode()
    job.refresh_from_db()
    assert job.handler == "noop"


@pytest.mark.parametrize(
    "path",
    [
        "/dashboard/executions/?pool=a%00b",
        "/dashboard/executions/?job=%00",
        "/dashboard/jobs/?q=a%00b",
        "/dashboard/jobs/?state=%00",
        "/dashboard/audit/?actor=%00",
        "/dashboard/jobs/?na%00me=1",
    ],
)
def test_defect3_a_nul_in_a_dashboard_filter_is_400_not_500(staff_client, path):
    response = staff_client.get(path)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert "NUL" in response.content.decode()


def test_defect3_a_dashboard_time_filter_with_a_far_offset_is_read_in_utc(staff_client):
    assert staff_client.get("/dashboard/executions/?since=2027-01-01T00:00:00%2B16:00").status_code == 200
    assert staff_client.get("/dashboard/executions/?until=0001-01-01T00:00:00%2B01:00").status_code == 200
