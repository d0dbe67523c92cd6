"""A one-off job whose run failed reads as failed on the dashboard's job list and job page, and
the job list can show only the failing jobs."""

import pytest

from executions.states import ExecutionState as S

pytestmark = pytest.mark.django_db


def test_a_failed_one_off_reads_failed_not_completed(member_client, tenant, make_job, drive):
    failed = make_job(tenant, name="broken-import", handler="fail")
    drive(failed.executions.get(), S.DEAD)
    fine = make_job(tenant, name="fine-import")
    drive(fine.executions.get(), S.SUCCEEDED)

    listing = member_client.get("/dashboard/jobs/").content.decode()
    page = member_client.get(f"/dashboard/jobs/{failed.pk}/").content.decode()

    row = listing[listing.index(f'data-job="{failed.pk}"') :]
    assert 'data-job-state="FAILED"' in row[: row.index("</tr>")]
    fine_row = listing[listing.index(f'data-job="{fine.pk}"') :]
    assert 'data-job-state="COMPLETED"' in fine_row[: fine_row.index("</tr>")]
    assert 'data-job-state="FAILED"' in page and "last run FAILED" in page


def test_the_failing_filter_lists_only_failing_jobs(member_client, tenant, other_tenant, make_job, drive):
    drive(make_job(tenant, name="broken-import", handler="fail").executions.get(), S.DEAD)
    drive(make_job(tenant, name="fine-import").executions.get(), S.SUCCEEDED)
    drive(make_job(other_tenant, name="their-broken", handler="fail").executions.get(), S.DEAD)

    html = member_client.get("/dashboard/jobs/?failing=1").content.decode()

    assert "broken-import" in html and "fine-import" not in html and "their-broken" not in html
    assert 'checked data-testid="failing-filter"' in html
