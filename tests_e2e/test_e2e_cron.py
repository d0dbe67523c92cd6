"""Cron fires with real processes: a dispatcher killed in the middle of a claim that makes the
claimed fires' successors (set-based, dispatcher._materialise_next) loses and doubles nothing."""

import signal
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from executions import history
from executions.models import Execution
from jobs.models import Job
from testing.harness import database_url, wait_for

pytestmark = pytest.mark.e2e

JOBS = 200


def _waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="holds a row lock from a second session")
def test_a_dispatcher_killed_mid_claim_of_cron_fires_loses_and_doubles_nothing(live, tenant, make_job):
    """200 cron jobs due at once. One job's row is held (FOR NO KEY UPDATE) by another session,
    so the dispatcher's claim that takes its fire stops at its last statement, after moving the
    fires and inserting their successors; SIGKILL it there. Then a second dispatcher: every fire runs exactly once
    and every job has exactly one next fire, which its next_fire_at names."""
    # Hourly at the minute half an hour from now: each job's fire of ~30 minutes ago is due and its
    # successor ~30 minutes ahead. A schedule whose next fire falls within the test (`*/5` run a
    # few seconds before a fifth minute) made every successor due too, and ran twice the fires.
    now = timezone.now()
    schedule = f"{(now.minute + 30) % 60} * * * *"
    made_at = now - timedelta(minutes=70)
    jobs = [make_job(tenant, type="CRON", schedule=schedule, now=made_at) for _ in range(JOBS)]
    live.worker(wait=False)
    live.ready()
    blocker = psycopg.connect(database_url())
    blocker.execute("SELECT 1 FROM jobs_job WHERE id = %s FOR NO KEY UPDATE", [jobs[-1].pk])

    first = live.dispatcher()
    wait_for(lambda: _waiting_on_a_lock() == 1, timeout=60, what="the claim to wait on the held job row")
    first.signal(signal.SIGKILL)
    wait_for(lambda: not first.members(), timeout=5, what="the killed dispatcher to be gone")
    blocker.rollback()
    blocker.close()
    # Its session finds the client gone once the lock is granted, and rolls the claim back.
    wait_for(lambda: _waiting_on_a_lock() == 0, timeout=10, what="the killed claim's session to end")
    # What the killed claim held is as it was before it: the held job's fire PENDING with no
    # successor. Fires claimed (and committed) before it have exactly one successor each.
    held = list(Execution.objects.filter(job=jobs[-1]).values_list("state", flat=True))
    assert held == ["PENDING"]
    for job in Job.objects.filter(tenant=tenant):
        states = list(Execution.objects.filter(job=job).order_by("scheduled_for").values_list("state", flat=True))
        assert states == ["PENDING"] or (len(states) == 2 and states[1] == "PENDING"), (job.pk, states)

    live.dispatcher()
    wait_for(
        lambda: Execution.objects.filter(tenant=tenant, state="SUCCEEDED").count() == JOBS,
        timeout=90,
        what="every fire to run",
    )

    for job in Job.objects.filter(tenant=tenant):
        runs = list(Execution.objects.filter(job=job).order_by("scheduled_for"))
        assert [e.state for e in runs] == ["SUCCEEDED", "PENDING"], job.pk
        assert job.next_fire_at == runs[1].scheduled_for > timezone.now()
    histories = history.timelines(Execution.objects.filter(tenant=tenant)).values()
    starts = [e for events in histories for e in events if (e.from_state, e.to_state) == ("QUEUED", "RUNNING")]
    assert len(starts) == JOBS  # none ran twice
