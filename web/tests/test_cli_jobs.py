"""`manage.py jobs` (web/management/commands/jobs.py): an operator's job work from the command
line, scoped to one tenant. Each subcommand prints a table, or with --json what the API answers
for the same objects; each action (trigger, pause, resume, cancel) goes through the API's service
and leaves one audit row of actor kind `cli` naming the operating system's user; a missing or
unknown tenant or id is one line and a non-zero exit (the process itself: test_cli_process.py)."""

import io
import json
import re
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from audit.models import AuditEntry
from executions.models import Execution
from jobs.models import Job
from scheduling.job_changes import job_pause

pytestmark = pytest.mark.django_db

FIRST = uuid.UUID("abcdef01-0000-4000-8000-000000000001")
SECOND = uuid.UUID("abcdef01-ffff-4fff-bfff-ffffffffffff")  # the same first 8 characters


@pytest.fixture(autouse=True)
def operator(monkeypatch) -> str:
    """The operating system's user the commands run as."""
    monkeypatch.setattr("getpass.getuser", lambda: "ops-alice")
    return "ops-alice"


def cli(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("jobs", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def cli_json(*args: str):
    return json.loads(cli(*args, "--json")[0])


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.splitlines()]


@pytest.fixture
def nightly(tenant, make_job) -> Job:
    return make_job(tenant, type="CRON", name="nightly report", schedule="30 2 * * *", timezone="Europe/Paris")


def test_list_prints_the_tenants_jobs_newest_first_and_only_theirs(tenant, other_tenant, make_job, nightly):
    heartbeat = make_job(tenant, type="INTERVAL", name="heartbeat", every_sec=3725)
    make_job(other_tenant, name="theirs")
    job_pause(job=heartbeat, now=timezone.now())

    out, err = cli("list", "--tenant", "acme")

    header, *lines = out.splitlines()
    assert header.split() == ["ID", "NAME", "TYPE", "STATE", "FIRES", "RUNS", "NEXT", "FIRE", "LAST", "RUN"]
    assert [line[:8] for line in lines] == [str(heartbeat.pk)[:8], str(nightly.pk)[:8]]
    assert "heartbeat" in lines[0] and "INTERVAL  PAUSED" in lines[0] and "every 1 h 2 min 5 s" in lines[0]
    assert "30 2 * * * Europe/Paris" in lines[1] and "default/noop" in lines[1]
    assert "theirs" not in out and err == ""

    out, _ = cli("list", "--tenant", "acme", "--state", "paused")
    assert [line.split()[1] for line in out.splitlines()[1:]] == ["heartbeat"]
    out, _ = cli("list", "--tenant", "acme", "--state", "PAUSED", "--state", "ACTIVE")
    assert len(out.splitlines()) == 3


def test_list_says_what_fires_each_kind_of_job_and_what_it_runs(api, tenant):
    bodies = [
        {"name": "etl", "type": "DELAYED", "delaySec": 300, "workflow": {"steps": [
            {"name": "extract", "target": {"handler": "noop"}},
            {"name": "load", "target": {"handler": "noop"}, "dependsOn": ["extract"]},
        ]}},
        {"name": "paid", "type": "EVENT", "on": "invoice.paid", "target": {"handler": "noop"}},
        {"name": "launch", "type": "ONCE", "runAt": "2031-05-01T12:00:00+02:00", "target": {"handler": "sleep"}},
    ]  # fmt: skip
    for body in bodies:
        assert api.post("/v1/jobs", body, format="json").status_code == 201

    out, _ = cli("list", "--tenant", "acme")

    fires_and_runs = [re.split(" {2,}", line)[4:6] for line in out.splitlines()[1:]]
    assert fires_and_runs == [
        ["at 2031-05-01 10:00:00Z", "default/sleep"],
        ["on invoice.paid", "default/noop"],
        ["delayed 5 min", "workflow of 2 steps"],
    ]


def test_list_json_is_what_the_api_lists(api, tenant, make_job, nightly):
    make_job(tenant, type="DELAYED", name="hello", delay_sec=0)

    assert cli_json("list", "--tenant", "acme") == {"results": api.get("/v1/jobs").json()["results"]}
    assert cli_json("list", "--tenant", "acme", "--state", "CANCELLED") == {"results": []}


def test_list_stops_at_the_limit_and_says_so_on_stderr(tenant, make_job):
    for n in range(3):
        make_job(tenant, name=f"job {n}")

    out, err = cli("list", "--tenant", "acme", "--limit", "2")

    assert [line.split()[2] for line in out.splitlines()[1:]] == ["2", "1"]
    assert err.strip() == "more jobs than --limit 2: the newest 2 are shown"
    assert cli("list", "--tenant", "acme", "--limit", "3")[1] == ""


def test_show_prints_the_job_and_its_latest_executions(tenant, nightly):
    out, _ = cli("show", "--tenant", "acme", str(nightly.pk))

    assert f"job:             {nightly.pk}" in out
    assert "fires:           30 2 * * * Europe/Paris" in out
    assert "retries:         3 attempts, exponential backoff from 1000 ms to 60000 ms, with jitter" in out
    first = Execution.objects.get(job=nightly)
    assert f"\n{str(first.pk)[:8]}  1        PENDING  SCHEDULE" in out.split("latest executions:")[1]


def test_show_json_is_what_the_api_answers(api, tenant, make_job):
    job = make_job(tenant, type="DELAYED", name="due now", delay_sec=0, payload={"greeting": "hello"})

    assert cli_json("show", "--tenant", "acme", str(job.pk)[:8]) == api.get(f"/v1/jobs/{job.pk}").json()


def test_a_job_is_found_by_its_id_whole_or_short_in_any_form(tenant, make_job):
    make_job(tenant, name="first", id=FIRST)
    make_job(tenant, name="second", id=SECOND)

    for given in (str(FIRST), FIRST.hex, str(FIRST).upper(), "abcdef01-0000"):
        assert cli_json("show", "--tenant", "acme", given)["name"] == "first", given
    with pytest.raises(CommandError, match=r"^abcdef01 starts more than one job id in tenant acme: give more of it$"):
        cli("show", "--tenant", "acme", "abcdef01")
    with pytest.raises(CommandError, match=r"^'abcdef' is not an id: give the job's id whole, or its first 8"):
        cli("show", "--tenant", "acme", "abcdef")


def test_another_tenants_job_is_not_found_and_not_touched(other_tenant, tenant, make_job):
    theirs = make_job(other_tenant, name="theirs")

    with pytest.raises(CommandError, match=rf"^no job {theirs.pk} in tenant acme$"):
        cli("show", "--tenant", "acme", str(theirs.pk))
    with pytest.raises(CommandError, match=rf"^no job {str(theirs.pk)[:8]} in tenant acme$"):
        cli("pause", "--tenant", "acme", str(theirs.pk)[:8])

    assert Job.objects.get(pk=theirs.pk).standing == "ACTIVE"
    # The attempt is in the log, filed under the tenant it was made in, never under globex.
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome, entry.actor_kind, entry.target_id, entry.tenant_id, entry.job_id) == (
        "job.pause",
        "NOT_FOUND",
        "cli",
        str(theirs.pk)[:8],
        tenant.pk,
        None,
    )


def _only_entry(operator: str, job: Job) -> AuditEntry:
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.actor_kind, entry.actor_id, entry.source_ip) == (operator, "cli", None, None)
    assert (entry.target_type, entry.target_id, entry.job_id, entry.tenant_id) == (
        "job",
        str(job.pk),
        job.pk,
        job.tenant_id,
    )
    return entry


def test_pause_then_resume_act_through_the_service_with_an_audit_row_each(operator, tenant, nightly):
    out, err = cli("pause", "--tenant", "acme", str(nightly.pk)[:8])

    assert out.strip() == f"job {str(nightly.pk)[:8]} (nightly report) paused: no run of it starts until it is resumed"
    assert err == "" and Job.objects.get(pk=nightly.pk).state == "PAUSED"
    assert (_only_entry(operator, nightly).action, AuditEntry.objects.get().outcome) == ("job.pause", "OK")

    resumed = cli_json("resume", "--tenant", "acme", str(nightly.pk))

    assert resumed["state"] == "ACTIVE" and resumed["jobId"] == str(nightly.pk)
    newest = AuditEntry.objects.order_by("-id").first()
    assert (newest.action, newest.outcome, newest.actor, newest.actor_kind) == ("job.resume", "OK", operator, "cli")


def test_pause_json_is_the_job_as_the_api_represents_it(api, tenant, make_job, nightly):
    paused = cli_json("pause", "--tenant", "acme", str(nightly.pk))

    detail = api.get(f"/v1/jobs/{nightly.pk}").json()
    assert paused == {key: value for key, value in detail.items() if key != "latestExecutions"}
    # As POST /v1/jobs/{id}/pause answers: the job, not its detail.
    assert set(paused) == set(api.post(f"/v1/jobs/{make_job(tenant).pk}/pause").json())


def test_trigger_makes_an_execution_due_now_and_records_it(operator, api, tenant, nightly):
    out, _ = cli("trigger", "--tenant", "acme", str(nightly.pk)[:8])

    triggered = Execution.objects.get(job=nightly, origin="TRIGGER")
    assert out.startswith(f"triggered job {str(nightly.pk)[:8]} (nightly report): execution {str(triggered.pk)[:8]}")
    entry = _only_entry(operator, nightly)
    assert (entry.action, entry.outcome, entry.detail) == ("job.trigger", "OK", f"execution {triggered.pk}")

    again = cli_json("trigger", "--tenant", "acme", str(nightly.pk))
    detail = api.get(f"/v1/executions/{again['executionId']}").json()
    assert again == {key: value for key, value in detail.items() if key not in {"events", "traceback", "traceId"}}
    assert set(again) == set(api.post(f"/v1/jobs/{nightly.pk}/trigger").json())


def test_cancel_ends_the_job_and_its_pending_run(operator, tenant, nightly):
    out, _ = cli("cancel", "--tenant", "acme", str(nightly.pk))

    assert "cancelled: no future fires" in out
    assert Job.objects.get(pk=nightly.pk).state == "CANCELLED"
    assert list(Execution.objects.filter(job=nightly).values_list("state", flat=True)) == ["CANCELLED"]
    assert (_only_entry(operator, nightly).action, AuditEntry.objects.get().outcome) == ("job.cancel", "OK")


def test_a_refused_action_is_one_line_a_failure_and_a_refused_row(operator, tenant, nightly):
    with pytest.raises(CommandError, match=r"^resume refused: job .* cannot go from ACTIVE to ACTIVE$") as refused:
        cli("resume", "--tenant", "acme", str(nightly.pk))

    assert "\n" not in str(refused.value)
    entry = _only_entry(operator, nightly)
    assert (entry.action, entry.outcome) == ("job.resume", "REFUSED")
    assert "cannot go from ACTIVE to ACTIVE" in entry.detail
    cli("cancel", "--tenant", "acme", str(nightly.pk))
    with pytest.raises(CommandError, match=r"^trigger refused: the job is cancelled; it runs no more$"):
        cli("trigger", "--tenant", "acme", str(nightly.pk))


def test_resume_dry_run_says_what_would_run_changes_nothing_and_is_not_audited(api, tenant, make_job):
    an_hour_ago = timezone.now() - timedelta(hours=1)
    job = make_job(tenant, type="CRON", schedule="*/10 * * * *", misfire_policy="RUN_ALL", now=an_hour_ago)
    assert api.post(f"/v1/jobs/{job.pk}/pause").status_code == 200
    before = AuditEntry.objects.count()

    out, _ = cli("resume", "--tenant", "acme", str(job.pk)[:8], "--dry-run")
    preview = cli_json("resume", "--tenant", "acme", str(job.pk), "--dry-run")

    assert out.startswith(f"dry run:         nothing changed; job {str(job.pk)[:8]} (cron job) is PAUSED")
    assert "misfire policy:  RUN_ALL (grace 1 min)" in out
    assert f"would run:       {preview['wouldRunCount']}: " in out
    answer = api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true").json()
    assert preview | {"at": None} == answer | {"at": None}
    assert preview["wouldRunCount"] >= 6
    assert Job.objects.get(pk=job.pk).state == "PAUSED"
    assert AuditEntry.objects.count() == before
    with pytest.raises(CommandError, match=r"^resume refused: "):
        cli("resume", "--tenant", "acme", str(make_job(tenant).pk), "--dry-run")


def test_a_missing_or_unknown_tenant_or_id_is_one_line(tenant, nightly):
    with pytest.raises(CommandError, match=r"^no tenant 'nosuch'$"):
        cli("list", "--tenant", "nosuch")
    with pytest.raises(CommandError, match=r"^Error: the following arguments are required: --tenant$"):
        cli("list")
    with pytest.raises(CommandError, match=r"^Error: the following arguments are required: ID$"):
        cli("pause", "--tenant", "acme")
    with pytest.raises(CommandError, match=r"^no job 00000000 in tenant acme$"):
        cli("trigger", "--tenant", "acme", "00000000")
    with pytest.raises(CommandError, match=r"argument --state: 'running' is not a state; the states: ACTIVE, PAUSED"):
        cli("list", "--tenant", "acme", "--state", "running")
    with pytest.raises(CommandError, match=r"argument --limit: '0' is not a whole number of 1 or more"):
        cli("list", "--tenant", "acme", "--limit", "0")
    assert AuditEntry.objects.filter(outcome="NOT_FOUND", action="job.trigger", target_id="00000000").count() == 1
