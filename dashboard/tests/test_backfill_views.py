"""The job page shows the job's backfills with their progress: runs ended of the fires, those
running, waiting to be released, skipped."""

from datetime import UTC, datetime

import pytest
from django.test import Client
from django.utils import timezone

from executions.models import Execution, Origin
from executions.states import ExecutionState as S
from scheduling.backfills import backfill_create, backfill_release

pytestmark = pytest.mark.django_db


def test_the_job_page_shows_a_backfills_progress(member_client: Client, tenant, make_job, drive):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    backfill = backfill_create(
        job=job,
        start=datetime(2026, 3, 1, tzinfo=UTC),
        end=datetime(2026, 3, 1, 4, tzinfo=UTC),
        order="OLDEST_FIRST",
        reprocess="NONE",
        max_concurrent=2,
        now=timezone.now(),
    )
    backfill_release(now=timezone.now(), limit=500)
    drive(Execution.objects.filter(origin=Origin.BACKFILL).order_by("scheduled_for").first(), S.SUCCEEDED)

    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    assert 'data-testid="job-backfills"' in page
    assert f'data-backfill="{backfill.pk}"' in page
    assert "1/4" in page  # one run ended of four fires
    assert "RUNNING" in page


def test_a_job_without_backfills_shows_no_panel(member_client: Client, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    assert 'data-testid="job-backfills"' not in member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
