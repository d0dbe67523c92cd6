"""`manage.py executions` (web/management/commands/executions.py): a tenant's executions listed
(a job's, or all, by state) and an execution's log lines printed, or followed as they are logged
until it ends; with --json what the API answers. Reads are not audited. Following is driven by
an injected sleep, so the test waits for nothing."""

import io
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from audit.models import AuditEntry
from executions import logs, transitions
from executions.models import Execution
from web.management.commands import executions as command

pytestmark = pytest.mark.django_db

T0 = datetime(2027, 3, 14, 9, 0, tzinfo=UTC)


def cli(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("executions", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def write(execution: Execution, attempt: int, *messages: str, first_seq: int = 1, level: str = "INFO") -> None:
    lines = [
        logs.Line(seq=seq, at=T0 + timedelta(seconds=seq), level=level, logger="billing.invoices", message=message)
        for seq, message in enumerate(messages, start=first_seq)
    ]
    logs.log_lines_write(execution_id=execution.pk, attempt=attempt, lines=lines)


def test_list_prints_a_jobs_executions_newest_first(tenant, other_tenant, make_job, drive):
    job = make_job(tenant, type="DELAYED", name="invoices", delay_sec=0, now=timezone.now() - timedelta(hours=2))
    first = drive(job.executions.get(), "DEAD")
    later = make_job(tenant, type="DELAYED", name="later", delay_sec=0).executions.get()
    make_job(other_tenant, name="theirs")

    out, err = cli("list", "--tenant", "acme", "--job", str(job.pk)[:8])

    header, row = out.splitlines()
    columns = ["ID", "ATTEMPT", "STATE", "ORIGIN", "SCHEDULED FOR", "STARTED", "FINISHED", "WORKER", "NOTE"]
    assert re.split(" {2,}", header) == columns
    assert row.split()[:4] == [str(first.pk)[:8], "1", "DEAD", "SCHEDULE"]
    assert row.endswith("worker-1  boom") and err == ""

    out, _ = cli("list", "--tenant", "acme")  # every job's: with a JOB column, newest scheduled first
    assert [line.split()[:3] for line in out.splitlines()[1:]] == [
        [str(later.pk)[:8], str(later.job_id)[:8], "1"],
        [str(first.pk)[:8], str(job.pk)[:8], "1"],
    ]
    out, _ = cli("list", "--tenant", "acme", "--state", "dead")
    assert [line[:8] for line in out.splitlines()[1:]] == [str(first.pk)[:8]]
    out, err = cli("list", "--tenant", "acme", "--limit", "1")
    assert len(out.splitlines()) == 2 and err.strip() == "more executions than --limit 1: the newest 1 are shown"
    assert cli("list", "--tenant", "acme", "--state", "QUEUED")[0].strip() == "no executions"
    assert AuditEntry.objects.count() == 0  # reads are not audited


def test_list_json_is_what_the_api_lists(api, tenant, make_job, drive):
    job = make_job(tenant, type="DELAYED", name="invoices", delay_sec=0)
    drive(job.executions.get(), "SUCCEEDED")

    listed = json.loads(cli("list", "--tenant", "acme", "--job", str(job.pk), "--json")[0])

    assert listed == {"results": api.get(f"/v1/executions?jobId={job.pk}").json()["results"]}
    assert listed["results"][0]["result"] == {"ok": True}


def test_another_tenants_job_or_execution_is_not_found(tenant, other_tenant, make_job):
    theirs = make_job(other_tenant, name="theirs")
    execution = theirs.executions.get()

    with pytest.raises(CommandError, match=rf"^no job {theirs.pk} in tenant acme$"):
        cli("list", "--tenant", "acme", "--job", str(theirs.pk))
    with pytest.raises(CommandError, match=rf"^no execution {str(execution.pk)[:8]} in tenant acme$"):
        cli("logs", "--tenant", "acme", str(execution.pk)[:8])
    with pytest.raises(CommandError, match=r"^Error: the following arguments are required: ID$"):
        cli("logs", "--tenant", "acme")
    with pytest.raises(CommandError, match=r"^no tenant 'nosuch'$"):
        cli("logs", "--tenant", "nosuch", str(execution.pk))


@pytest.fixture
def logged(tenant, make_job) -> Execution:
    """An execution whose attempt 1 failed with a traceback and dropped lines, and attempt 2 logged two lines."""
    execution = make_job(tenant).executions.get()
    write(execution, 2, "second try", "worked")
    write(execution, 1, "first try", "Traceback (most recent call last):\nValueError: no", level="ERROR")
    logs.log_marker_write(execution_id=execution.pk, attempt=1, seq=3, at=T0, dropped=5, limit=2)
    return execution


def test_logs_prints_each_line_with_its_time_attempt_level_and_logger(logged):
    out, _ = cli("logs", "--tenant", "acme", str(logged.pk)[:8])

    assert out.splitlines() == [
        "2027-03-14 09:00:01.000Z  #1  ERROR    billing.invoices  first try",
        "2027-03-14 09:00:02.000Z  #1  ERROR    billing.invoices  Traceback (most recent call last):",
        "ValueError: no",
        "2027-03-14 09:00:00.000Z  #1  WARNING  tickwork  5 more lines not kept: an attempt keeps at most 2 lines "
        "(TICKWORK_LOG_LINES_PER_ATTEMPT)",
        "2027-03-14 09:00:01.000Z  #2  INFO     billing.invoices  second try",
        "2027-03-14 09:00:02.000Z  #2  INFO     billing.invoices  worked",
    ]
    out, _ = cli("logs", "--tenant", "acme", str(logged.pk), "--attempt", "2")
    assert [line.split("  ")[-1] for line in out.splitlines()] == ["second try", "worked"]


def test_logs_json_is_what_the_api_answers(api, logged):
    for attempt in ([], ["--attempt", "1"], ["--attempt", "2"]):
        printed = json.loads(cli("logs", "--tenant", "acme", str(logged.pk), "--json", *attempt)[0])
        query = f"?attempt={attempt[1]}" if attempt else ""
        assert printed == api.get(f"/v1/executions/{logged.pk}/logs{query}").json(), attempt
    assert printed["dropped"] == [] and len(printed["results"]) == 2


class Clock:
    """Stands in for time.sleep: each call is one poll of --follow, and does what the test's
    script says happens meanwhile (a worker logs lines, the execution ends)."""

    def __init__(self, *steps) -> None:
        self.steps = list(steps)
        self.slept: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.steps.pop(0)()


def test_follow_prints_new_lines_as_they_come_until_the_execution_ends(monkeypatch, tenant, make_job, drive):
    execution = drive(make_job(tenant, type="DELAYED", delay_sec=0).executions.get(), "RUNNING")
    write(execution, 1, "starting")

    def ends() -> None:
        write(execution, 1, "done", first_seq=3)
        assert transitions.succeed(
            execution_id=execution.pk, lease_token=execution.lease_token, now=timezone.now(), result={"ok": True}
        )

    clock = Clock(
        lambda: None,  # nothing new
        lambda: write(execution, 1, "halfway", first_seq=2),
        ends,
        # The end seen: one more look, for what an atomic handler writes just after its outcome.
        lambda: write(execution, 1, "after the outcome", first_seq=4),
    )
    monkeypatch.setattr(command.Command, "sleep", clock)

    out, _ = cli("logs", "--tenant", "acme", str(execution.pk), "--follow")

    assert [line.split("  ")[-1] for line in out.splitlines()] == ["starting", "halfway", "done", "after the outcome"]
    assert clock.slept == [1.0] * 4 and clock.steps == []


def test_follow_with_json_prints_one_object_a_line(monkeypatch, api, tenant, make_job, drive):
    execution = drive(make_job(tenant, type="DELAYED", delay_sec=0).executions.get(), "SUCCEEDED")
    write(execution, 1, "one", "two")
    monkeypatch.setattr(command.Command, "sleep", Clock(lambda: None))

    out, _ = cli("logs", "--tenant", "acme", str(execution.pk), "--follow", "--json")

    assert [json.loads(line) for line in out.splitlines()] == api.get(f"/v1/executions/{execution.pk}/logs").json()[
        "results"
    ]


def test_ctrl_c_stops_following_with_the_lines_so_far(monkeypatch, tenant, make_job, drive):
    execution = drive(make_job(tenant, type="DELAYED", delay_sec=0).executions.get(), "RUNNING")
    write(execution, 1, "starting")

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(command.Command, "sleep", staticmethod(interrupt))
    out = io.StringIO()
    with pytest.raises(SystemExit) as stopped:
        call_command("executions", "logs", "--tenant", "acme", str(execution.pk), "--follow", stdout=out)

    assert stopped.value.code == 130
    assert out.getvalue().rstrip().endswith("starting")
