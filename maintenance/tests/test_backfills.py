"""The sweeper's backfills service: each pass releases a backfill's next fires while fewer than
its maxConcurrent runs are unfinished, in its order, and finishes it when all have ended."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from executions.models import Backfill, Execution, Origin
from executions.states import ExecutionState as S
from maintenance.services.backfills import Backfilled, Backfills
from scheduling.backfills import backfill_create

pytestmark = pytest.mark.django_db
DAY = datetime(2026, 3, 1, tzinfo=UTC)


def test_each_pass_keeps_max_concurrent_runs_unfinished_until_done(tenant, make_job, drive):
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    now = timezone.now()
    backfill = backfill_create(
        job=job,
        start=DAY,
        end=DAY + timedelta(hours=5),
        order="OLDEST_FIRST",
        reprocess="NONE",
        max_concurrent=2,
        now=now,
    )
    service = Backfills()
    passes = []
    for second in range(6):  # a pass a second: what each made is told apart by its created_at
        passes.append(service.run_once(now=now + timedelta(seconds=second)))
        for execution in Execution.objects.filter(origin=Origin.BACKFILL, state=S.PENDING):
            drive(execution, S.SUCCEEDED)
    assert passes == [
        Backfilled(released=2),
        Backfilled(released=2),
        Backfilled(released=1),
        Backfilled(finished=1),
        Backfilled(),
        Backfilled(),
    ]
    backfill.refresh_from_db()
    assert (backfill.state, backfill.finished_at) == ("DONE", now + timedelta(seconds=3))
    made: dict[datetime, set[datetime]] = {}
    for created, fire in Execution.objects.filter(origin=Origin.BACKFILL).values_list("created_at", "scheduled_for"):
        made.setdefault(created, set()).add(fire)
    # Oldest first, two at a time: an execution's created_at is the `now` of the pass that made it.
    assert [made[at] for at in sorted(made)] == [
        {DAY, DAY + timedelta(hours=1)},
        {DAY + timedelta(hours=h) for h in (2, 3)},
        {DAY + timedelta(hours=4)},
    ]


def test_a_cancelled_jobs_backfill_is_cancelled(tenant, make_job):
    from scheduling.job_changes import job_cancel

    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    now = timezone.now()
    backfill_create(
        job=job,
        start=DAY,
        end=DAY + timedelta(hours=5),
        order="OLDEST_FIRST",
        reprocess="NONE",
        max_concurrent=2,
        now=now,
    )
    job_cancel(job=job, now=now)
    assert Backfills().run_once(now=now) == Backfilled(finished=1)
    assert Backfill.objects.get().state == "CANCELLED"
