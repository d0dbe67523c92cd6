"""The dashboard with spreading and resume: the job page's resume button asks first with the dry
run's answer (what would run, what would be skipped, under the job's misfire policy), and the edit
form's schedule preview resolves H with the job's id."""

import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from readmodels.selectors import job_resume_preview
from scheduling.job_changes import job_pause

pytestmark = pytest.mark.django_db


def test_a_paused_jobs_resume_button_confirms_with_the_dry_run(member_client, tenant, make_job):
    created = timezone.now() - timedelta(hours=1)
    job = make_job(tenant, type="CRON", schedule="*/10 * * * *", misfire_policy="RUN_ONCE", now=created)
    job_pause(job=job, now=created)
    plan = job_resume_preview(job=job, now=timezone.now()).catch_up

    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()

    form = re.search(r'<form[^>]*/resume"[^>]*data-confirm="([^"]*)"', page)
    assert form, "the resume form asks before resuming"
    question = html.unescape(form.group(1))
    assert "misfirePolicy RUN_ONCE" in question
    assert f"would run now: {plan.run_count} (" in question
    assert f"would be skipped: {plan.skip_count} (" in question and ", …)" in question  # 5 skipped, 3 listed
    assert 'data-testid="resume-preview"' in page
    assert job.executions.count() == 1 and job.executions.get().state == "PENDING"  # asking changed nothing


def test_an_active_jobs_page_has_no_resume_question(member_client, tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="*/10 * * * *")
    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    assert 'data-testid="resume-preview"' not in page and "/resume" not in page


def test_the_edit_forms_preview_resolves_h_with_the_jobs_id(member_client, tenant, make_job):
    """The form's live preview asks /v1/schedule/preview with seed=<the job's id> (app.js), so an
    H schedule shows that job's times; a new job's form has no seed to give."""
    job = make_job(tenant, type="CRON", schedule="H H * * *")
    edit = member_client.get(f"/dashboard/jobs/{job.pk}/edit").content.decode()
    assert f'data-schedule-preview data-seed="{job.pk}"' in edit
    create = member_client.get("/dashboard/jobs/new").content.decode()
    assert "data-schedule-preview>" in create and "data-seed" not in create
