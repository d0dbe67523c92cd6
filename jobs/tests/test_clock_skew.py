"""The API writes due times from the database's clock, not from its host's (defect 12)."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from executions.clock import db_now
from executions.models import Execution
from testing import harness

pytestmark = pytest.mark.django_db

SKEW = timedelta(seconds=25)


@pytest.fixture
def host_clock_behind(monkeypatch):
    """This web host's clock runs 25 s behind the database's."""
    local_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: local_now() - SKEW)


def test_defect12_delayed_job_is_due_delay_seconds_after_the_database_clock(api, host_clock_behind):
    """delaySec counts from the database's time: a web host 25 s behind does not make the job
    due 25 s early (nor its first event 25 s before anything the dispatcher writes)."""
    before = db_now()
    data = api.post(
        "/v1/jobs",
        {"name": "reminder", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}},
        format="json",
    ).json()
    after = db_now()

    due = datetime.fromisoformat(data["runAt"])
    assert before + timedelta(seconds=60) <= due <= after + timedelta(seconds=60)
    execution = Execution.objects.get(job_id=data["jobId"])
    assert execution.available_at == due
    (scheduled,) = harness.events(execution.pk)
    assert before <= scheduled.at <= after
