"""The roles through PgBouncer in transaction mode (README, "PgBouncer"): every end-to-end test on
PostgreSQL runs its roles so (testing/fixtures.py, `pooler`); this one shows that they do, and that
what needs a session of its own, the LISTEN connections on DATABASE_DIRECT_URL, still works: a
dispatcher that polls once a minute is woken for a new job's time, and a worker that heartbeats
every 10 s hears a cancel at once."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

import testing.handlers_for_tests  # noqa: F401  (the test-only handlers, as in the workers)
from executions.models import Execution
from scheduling.execution_changes import execution_cancel
from testing.harness import execution_in, wait_for

pytestmark = pytest.mark.e2e


def test_through_pgbouncer_the_roles_are_woken_and_hear_a_cancel_on_their_direct_connections(
    live, pooler, tenant, make_job
):
    if connection.vendor != "postgresql" or pooler is None:
        pytest.skip("PgBouncer is in front of PostgreSQL (testing/pgbouncer.py)")
    # A poll of a minute and a lease of 30 s (a heartbeat every 10 s): only the notifications,
    # sent through the pooler with their transactions, can make either happen in time.
    live.worker(concurrency=1, wait=False, env={"TICKWORK_LEASE_SECONDS": "30"})
    live.dispatcher(env={"TICKWORK_POLL_SECONDS": "60"})
    live.ready()
    assert pooler.clients(connection.settings_dict["NAME"]) >= 2, "the roles do not go through PgBouncer"

    due = timezone.now() + timedelta(seconds=1.5)
    quick = Execution.objects.get(job=make_job(tenant, run_at=due))
    done = wait_for(lambda: execution_in(quick.pk, "SUCCEEDED"), timeout=15, what="the job to run")
    assert (done.queued_at - done.scheduled_for).total_seconds() < 1.0

    slow = Execution.objects.get(job=make_job(tenant, run_at=timezone.now(), handler="sleep", payload={"seconds": 60}))
    running = wait_for(lambda: execution_in(slow.pk, "RUNNING"), timeout=15, what="the run to start")
    assert execution_cancel(execution=running, now=timezone.now()) == "RUNNING"
    cancelled = wait_for(lambda: execution_in(slow.pk, "CANCELLED"), timeout=8, what="the run to be cancelled")
    assert (cancelled.finished_at - cancelled.cancel_requested_at).total_seconds() < 5.0
