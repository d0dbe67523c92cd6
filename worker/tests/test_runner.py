"""The worker side in-process, on whichever database the tests run: a run's heartbeat. The
end-to-end tests exercise the same path in real worker processes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from testing.harness import wait_for
from testing.steps import claim
from worker import runner
from worker.heartbeats import Heartbeats

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def heartbeats(monkeypatch):
    """A heartbeat thread of the test's own: the process's may be asleep until a beat of an
    earlier test's run under the default lease. At the end it is woken to find no run, and so
    closes its connection (the test database is dropped at the end of the session)."""
    monkeypatch.setattr(Heartbeats, "_current", None, raising=False)
    yield
    thread = Heartbeats.current()
    if thread is not None:
        with thread.changed:
            thread.changed.notify()
        wait_for(lambda: thread.idle, timeout=5, what="the heartbeat thread to find no run")
        with thread.changed:  # it closes its connection under this lock once idle
            pass


def test_defect7_a_heartbeat_stops_a_run_past_its_timeout_and_no_beat_fails(
    settings, tenant, make_job, caplog, heartbeats
):
    """The heartbeat reads the run's timeout back from its UPDATE and stops the handler once it
    has passed: the run is TIMED_OUT by its worker ("timed out"), and every beat succeeds. On the
    embedded default (SQLite) the time came back naive and every beat raised, so a run past its
    timeout ran on until the sweeper's backstop, and the worker's log got a traceback a second."""
    settings.TICKWORK_LEASE_SECONDS = 0.6  # a beat every 0.2 s
    make_job(
        tenant,
        run_at=timezone.now() - timedelta(seconds=1),
        handler="sleep",
        payload={"seconds": 5},
        timeout_sec=1,
        max_attempts=1,
    )
    (sent,) = claim(timezone.now())

    outcome = runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token)

    assert outcome == "TIMED_OUT"
    execution = Execution.objects.get(pk=sent.execution_id)
    assert execution.state == "DEAD"
    assert [e.message for e in execution.events.filter(to_state="TIMED_OUT")] == ["timed out"]
    assert "heartbeat of" not in caplog.text
