"""Named rate limits on the dashboard: the job form offers the defined limits (and "none", its
handler's own) for the target, sets, changes and clears the job's through the API's serializer
(an unknown name is its field error), and keeps it when something else is edited; the job page
says the limit the job's runs are held to, and why a run over it waits."""

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.tests.test_views import _job_form
from executions.models import Execution
from jobs import registry
from jobs.models import Job
from pools import rate_limits

pytestmark = pytest.mark.django_db

LIMITED_HANDLER = "test.dash-rate-limited"


@pytest.fixture
def payments():
    rate_limits.define(name="payments", per_second=10, burst=1)


@pytest.fixture
def limited_handler(monkeypatch):
    """A handler that declares the limit `payments`, registered for this test only."""
    spec = registry.HandlerSpec(name=LIMITED_HANDLER, func=lambda ctx: None, pool="default", rate_limit="payments")
    monkeypatch.setitem(registry._handlers, LIMITED_HANDLER, spec)


def _edit(member_client, job: Job, **overrides) -> str:
    """POST the edit form as the page shows it for `job`, with `overrides` typed in."""
    form = _job_form(runAt=job.run_at.strftime("%Y-%m-%dT%H:%M:%SZ"), payload='{"rows": 10}', pool="default")
    return member_client.post(f"/dashboard/jobs/{job.pk}/edit", {**form, **overrides}).content.decode()


def test_the_form_offers_the_defined_limits_and_the_handlers_own(member_client, payments, limited_handler):
    page = member_client.get("/dashboard/jobs/new").content.decode()

    assert '<option value="payments" >payments (10/s, burst 1)</option>' in page
    assert "None — the handler's own</option>" in page  # the chosen handler, noop, declares none
    assert f'value="{LIMITED_HANDLER}" data-pool="default" data-rate-limit="payments"' in page


def test_the_form_sets_changes_and_clears_it_and_the_page_says_it(member_client, tenant, payments):
    rate_limits.define(name="reports", per_second=0.5, burst=3)
    member_client.post("/dashboard/jobs/new", _job_form(rateLimit="payments"))
    job = Job.objects.get()
    assert job.rate_limit == "payments"
    edit = member_client.get(f"/dashboard/jobs/{job.pk}/edit").content.decode()
    assert '<option value="payments" selected>' in edit
    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    assert '<dd data-testid="job-rate-limit">payments (10/s, burst 1)</dd>' in page

    _edit(member_client, job, rateLimit="reports")  # only the limit changed: the target is sent
    assert Job.objects.get(pk=job.pk).rate_limit == "reports"
    _edit(member_client, job, rateLimit="reports", name="renamed")  # the limit unchanged: kept
    assert Job.objects.get(pk=job.pk).rate_limit == "reports"
    _edit(member_client, job, rateLimit="", name="renamed")
    assert Job.objects.get(pk=job.pk).rate_limit is None
    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    assert '<dd data-testid="job-rate-limit">none</dd>' in page


def test_an_unknown_limit_is_the_apis_error_next_to_the_field(member_client, tenant, payments):
    created = member_client.post("/dashboard/jobs/new", _job_form(rateLimit="nope")).content.decode()

    assert 'data-error-for="rateLimit"' in created
    assert "unknown rate limit &quot;nope&quot;; known: payments" in created
    assert not Job.objects.exists()


def test_a_removed_limit_is_offered_as_such_and_kept_by_an_edit_of_something_else(
    member_client, tenant, make_job, payments
):
    job = make_job(tenant, rate_limit="payments")
    rate_limits.remove(name="payments")

    edit = member_client.get(f"/dashboard/jobs/{job.pk}/edit").content.decode()
    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    _edit(member_client, job, rateLimit="payments", name="renamed")

    assert '<option value="payments" selected>payments (not defined: its runs are not limited)</option>' in edit
    assert "payments (not defined: its runs are not limited)" in page
    assert Job.objects.get(pk=job.pk).name == "renamed"
    assert Job.objects.get(pk=job.pk).rate_limit == "payments"


def test_the_page_names_the_handlers_limit_when_the_job_names_none(
    member_client, tenant, make_job, payments, limited_handler
):
    job = make_job(tenant, handler=LIMITED_HANDLER)

    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    edit = member_client.get(f"/dashboard/jobs/{job.pk}/edit").content.decode()

    assert "— (the handler&#x27;s: payments, 10/s, burst 1)" in page
    assert "None — the handler's own (payments)</option>" in edit


def test_a_run_over_its_limit_says_so_and_when_its_turn_comes(member_client, tenant, make_job, payments):
    job = make_job(tenant, rate_limit="payments")
    turn = timezone.now() + timedelta(minutes=5)
    Execution.objects.filter(job=job).update(available_at=turn, rate_turn_at=turn)

    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()

    assert 'data-testid="pending-reason"' in page and ">RATE_LIMITED</span>" in page
    assert "rate limit payments (10/s, burst 1) is reached; its turn comes at" in page


def test_a_workflow_jobs_steps_say_their_limits(member_client, tenant):
    steps = [
        {"name": "charge", "target": {"pool": "default", "handler": "noop", "rate_limit": "payments"}},
        {"name": "notify", "target": {"pool": "default", "handler": "noop"}},
    ]
    job = Job.objects.create(
        tenant=tenant,
        name="checkout",
        type="ONCE",
        run_at=timezone.now() + timedelta(hours=1),
        workflow={"steps": [{**step, "payload": {}, "depends_on": []} for step in steps]},
    )

    page = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()

    assert 'data-testid="job-rate-limit"' not in page  # its steps name their targets
    assert '<span class="muted">rate limit</span> payments</td>' in page
    assert page.count('<span class="muted">rate limit</span>') == 1
