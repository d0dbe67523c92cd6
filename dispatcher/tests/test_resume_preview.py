"""The resume dry run (readmodels.selectors.job_resume_preview) agrees with what resume then does
through the dispatcher, under each misfire policy: the fires it says would run are the ones the
dispatcher publishes, the ones it says would be skipped are cancelled or never materialised, and
the fire it says is left pending is."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from executions.models import Execution, ExecutionEvent
from jobs import cron
from jobs.models import Job
from jobs.states import InvalidJobTransition
from readmodels.selectors import job_resume_preview
from scheduling.job_changes import job_pause, job_resume
from testing.steps import dispatch

pytestmark = pytest.mark.django_db


def on_a_fire(now: datetime) -> datetime:
    """30 s after a ten-minute boundary: fires of `*/10` sit at known distances from it."""
    return now.replace(minute=now.minute // 10 * 10, second=30, microsecond=0)


def snapshot(job: Job) -> tuple:
    rows = Execution.objects.filter(job=job).order_by("id").values_list("id", "state", "lease_token", "updated_at")
    return (
        Job.objects.filter(pk=job.pk).values_list("state", "next_fire_at", "updated_at").get(),
        list(rows),
        ExecutionEvent.objects.filter(execution__job=job).count(),
    )


def drain(now: datetime) -> list[str]:
    """dispatcher.run_once at `now` until it claims nothing; the ids it published."""
    published: list[str] = []
    while True:
        result, sent = dispatch(now)
        if not result.claimed:
            return published
        published += [d.execution_id for d in sent]


@pytest.mark.parametrize("policy", ["RUN_ONCE", "RUN_ALL", "SKIP"])
@pytest.mark.parametrize("schedule", ["*/10 * * * *", "H/10 * * * *"])
@pytest.mark.parametrize("paused_for", [timedelta(hours=1), timedelta(seconds=45)], ids=["1h", "45s"])
@pytest.mark.parametrize("window", [None, 1500, 20], ids=["no-window", "window-25min", "window-20s"])
def test_dry_run_matches_what_resume_then_does(settings, tenant, make_job, policy, schedule, paused_for, window):
    settings.TICKWORK_MISFIRE_GRACE_SECONDS = 60
    now = on_a_fire(timezone.now())
    created = now - paused_for
    job = make_job(
        tenant, type="CRON", schedule=schedule, misfire_policy=policy, catchup_window_sec=window, now=created
    )
    job_pause(job=job, now=created)
    pending = Execution.objects.get(job=job).scheduled_for
    before = snapshot(job)

    preview = job_resume_preview(job=job, now=now)

    assert snapshot(job) == before  # the dry run changed nothing
    plan = preview.catch_up
    assert (preview.policy, preview.at) == (policy, now)
    assert plan.run_count == len(plan.runs) and plan.skip_count == len(plan.skipped) and not plan.capped
    # Every fire from the pending one to now is accounted for, once.
    due = [pending, *cron.fires_between(schedule, "UTC", pending, now, seed=str(job.pk))] if pending <= now else []
    assert sorted(plan.runs + plan.skipped) == due

    job_resume(job=job, now=now)
    published = drain(now)

    ran = sorted(Execution.objects.get(pk=pk).scheduled_for for pk in published)
    cancelled = set(Execution.objects.filter(job=job, state="CANCELLED").values_list("scheduled_for", flat=True))
    materialised = set(Execution.objects.filter(job=job).values_list("scheduled_for", flat=True))
    assert ran == plan.runs
    for fire in plan.skipped:  # cancelled by SKIP or the window, or never materialised (RUN_ONCE and SKIP jump ahead)
        assert fire in cancelled or fire not in materialised
    (left,) = Execution.objects.filter(job=job, state="PENDING")
    assert left.scheduled_for == plan.next_fire == Job.objects.get(pk=job.pk).next_fire_at
    assert left.scheduled_for > now


def test_the_policies_differ_as_documented(settings, tenant, make_job):
    """Paused for an hour over `*/10`: RUN_ONCE runs the first missed fire and skips five, RUN_ALL
    runs all six, SKIP runs none (the last is 30 s late, within the grace, but it is never
    materialised: the first missed fire's claim jumps past now)."""
    settings.TICKWORK_MISFIRE_GRACE_SECONDS = 60
    now = on_a_fire(timezone.now())
    counts = {}
    for policy in ("RUN_ONCE", "RUN_ALL", "SKIP"):
        job = make_job(
            tenant, type="CRON", schedule="*/10 * * * *", misfire_policy=policy, now=now - timedelta(hours=1)
        )
        job_pause(job=job, now=now - timedelta(hours=1))
        plan = job_resume_preview(job=job, now=now).catch_up
        counts[policy] = (plan.run_count, plan.skip_count)
    assert counts == {"RUN_ONCE": (1, 5), "RUN_ALL": (6, 0), "SKIP": (0, 6)}


def test_a_retry_and_a_trigger_due_while_paused_run_on_resume(settings, tenant, make_job):
    """Runs outside the schedule's chain (a triggered run, a one-off's run) are not subject to the
    misfire policy: due by now, they run."""
    now = timezone.now()
    one_off = make_job(tenant, run_at=now - timedelta(hours=2), now=now - timedelta(hours=3))
    job_pause(job=one_off, now=now - timedelta(hours=3))
    plan = job_resume_preview(job=one_off, now=now).catch_up
    assert (plan.runs, plan.skipped, plan.next_fire) == ([now - timedelta(hours=2)], [], None)
    job_resume(job=one_off, now=now)
    assert [Execution.objects.get(pk=pk).scheduled_for for pk in drain(now)] == plan.runs


def test_a_job_that_is_not_paused_is_refused_as_resume_refuses_it(tenant, make_job):
    job = make_job(tenant, type="CRON", schedule="*/10 * * * *")
    with pytest.raises(InvalidJobTransition) as preview_error:
        job_resume_preview(job=job, now=timezone.now())
    with pytest.raises(InvalidJobTransition) as resume_error:
        job_resume(job=job, now=timezone.now())
    assert str(preview_error.value) == str(resume_error.value)


def test_a_long_pause_caps_the_lists_and_counts_every_fire(settings, tenant, make_job):
    """Paused for a week over an every-minute RUN_ALL job: 10,080 fires would run; the list holds
    the first 100 and the count says how many."""
    now = timezone.now().replace(second=30, microsecond=0)
    job = make_job(tenant, type="CRON", schedule="* * * * *", misfire_policy="RUN_ALL", now=now - timedelta(days=7))
    job_pause(job=job, now=now - timedelta(days=7))
    plan = job_resume_preview(job=job, now=now).catch_up
    assert plan.run_count == 7 * 24 * 60 and len(plan.runs) == 100 and plan.skip_count == 0
    assert plan.runs == sorted(plan.runs) and plan.runs[0] == Execution.objects.get(job=job).scheduled_for


def test_fires_older_than_the_window_are_recorded_as_skipped(settings, tenant, make_job):
    """RUN_ALL over `*/10` paused for an hour with a 25-minute window: the three fires at most 25
    minutes old run; the three older are claimed and cancelled, each with a reason naming the
    window, in the job's history (as SKIP's missed fires are)."""
    settings.TICKWORK_MISFIRE_GRACE_SECONDS = 60
    now = on_a_fire(timezone.now())
    job = make_job(
        tenant,
        type="CRON",
        schedule="*/10 * * * *",
        misfire_policy="RUN_ALL",
        catchup_window_sec=1500,
        now=now - timedelta(hours=1),
    )
    job_pause(job=job, now=now - timedelta(hours=1))
    plan = job_resume_preview(job=job, now=now).catch_up
    assert (plan.run_count, plan.skip_count) == (3, 3)
    job_resume(job=job, now=now)
    published = drain(now)
    assert len(published) == 3
    skipped = Execution.objects.filter(job=job, state="CANCELLED").order_by("scheduled_for")
    assert [e.scheduled_for for e in skipped] == plan.skipped
    for execution in skipped:
        assert "catchupWindowSec 1500" in execution.events.get(to_state="CANCELLED").message


def test_a_retry_is_not_judged_by_the_window(settings, tenant, make_job):
    """The window judges a fire when it is first claimed; its retries run however late."""
    settings.TICKWORK_MISFIRE_GRACE_SECONDS = 60
    now = on_a_fire(timezone.now())
    job = make_job(tenant, type="CRON", schedule="*/10 * * * *", catchup_window_sec=60, now=now - timedelta(hours=1))
    retry = Execution.objects.get(job=job)
    Execution.objects.filter(pk=retry.pk).update(attempt=2)  # as a retry of the hour-old fire would be
    assert str(retry.pk) in drain(now)
