"""The job form takes a recurring job's catch-up window (and an emptied box clears it); the job
page says it."""

import pytest
from django.test import Client

from jobs.models import Job

pytestmark = pytest.mark.django_db


def test_the_dashboard_form_sets_and_clears_it_and_the_job_page_shows_it(member_client: Client, tenant):
    form = {
        "name": "nightly",
        "type": "CRON",
        "schedule": "*/10 * * * *",
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
        "misfirePolicy": "RUN_ALL",
        "concurrencyPolicy": "ALLOW",
        "catchupWindowSec": "600",
        "tenant": tenant.slug,
    }
    member_client.post("/dashboard/jobs/new", form)
    job = Job.objects.get()
    assert job.catchup_window_sec == 600
    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    assert 'data-testid="job-catchup-window"' in page and "are skipped" in page
    edit = member_client.get(f"/dashboard/jobs/{job.pk}/edit").content.decode()
    assert 'name="catchupWindowSec" value="600"' in edit
    member_client.post(f"/dashboard/jobs/{job.pk}/edit", {**form, "catchupWindowSec": ""})
    job.refresh_from_db()
    assert job.catchup_window_sec is None
    invalid = member_client.post("/dashboard/jobs/new", {**form, "catchupWindowSec": "-3"})
    assert 'data-error-for="catchupWindowSec"' in invalid.content.decode()
