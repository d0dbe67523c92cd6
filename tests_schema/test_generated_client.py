"""A client generated from the live schema works (issue 33): openapi-python-client, with its default
configuration, makes a typed client of /v1/schema with no warning (clients/generate.py, which
`make client` runs), and a client developer's first hour goes through it against the roles started
as production starts them (the web role on gunicorn, a dispatcher, a sweeper and a Celery worker):
each type of job created, listed a page at a time, read, changed with If-Match, paused, resumed
after a dry run, triggered; a running execution cancelled; a bulk create; previews; a workflow's
runs; an event; the dead letter's groups; alert rules.

Every answer must parse into its generated model, and the model must know every field of it: a
field the schema does not declare is one a typed client cannot see, and one it declares wrongly
does not come back from the model as it was sent (`_known`)."""

import importlib
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import attrs
import pytest

from clients.generate import fetch_schema, generate
from testing import fixtures

pytestmark = pytest.mark.e2e

PACKAGE = "tickwork_api_client"


@pytest.fixture
def role_settings() -> dict[str, str]:
    """Short timings, as the end-to-end tests' roles have (testing/fixtures.py): a cancelled run's
    worker hears of it within a second, not a default lease's third."""
    return {
        "TICKWORK_LEASE_SECONDS": str(fixtures.LEASE_SECONDS),
        "TICKWORK_CANCEL_GRACE_SECONDS": str(fixtures.CANCEL_GRACE_SECONDS),
        "TICKWORK_PUBLISH_GRACE_SECONDS": str(fixtures.PUBLISH_GRACE_SECONDS),
        "TICKWORK_POLL_SECONDS": str(fixtures.POLL_SECONDS),
        "TICKWORK_SWEEP_SECONDS": str(fixtures.SWEEP_SECONDS),
        "TICKWORK_WORKER_BEAT_SECONDS": str(fixtures.WORKER_BEAT_SECONDS),
        "TICKWORK_WORKER_OFFLINE_SECONDS": str(fixtures.WORKER_OFFLINE_SECONDS),
    }


@pytest.fixture
def api(web, roles, token, tmp_path):
    """The generated package, imported from where it was generated, and a client of the token's."""
    roles.worker()
    schema = fetch_schema(web)
    said = generate(schema, tmp_path / "client")
    assert "Warning" not in said, said
    sys.path.insert(0, str(tmp_path / "client"))
    try:
        package = importlib.import_module(PACKAGE)
        client = package.AuthenticatedClient(base_url=web, token=token, raise_on_unexpected_status=True)
        yield Api(package, client, schema)
    finally:
        sys.path.remove(str(tmp_path / "client"))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


class Api:
    """The generated client's modules by name (`api.op("jobs", "jobs_create")`), its models, and
    the checks every answer goes through."""

    def __init__(self, package, client, schema: dict[str, Any]) -> None:
        self.client = client
        self.m = importlib.import_module(f"{PACKAGE}.models")
        self.unset = importlib.import_module(f"{PACKAGE}.types").UNSET
        # Objects whose schema declares fields and takes others too (an error's invalid fields).
        self.open = {
            name
            for name, component in schema["components"]["schemas"].items()
            if component.get("properties") and component.get("additionalProperties")
        }

    def call(self, tag: str, operation: str, *args, status: int = 200, **kwargs):
        """The operation's answer, parsed into its model and checked against what was sent."""
        module = importlib.import_module(f"{PACKAGE}.api.{tag}.{operation}")
        response = module.sync_detailed(*args, client=self.client, **kwargs)
        assert response.status_code == status, (operation, response.status_code, response.content)
        if status == 204:
            return response
        _known(response.parsed, self.open)
        assert _same(response.parsed.to_dict(), _json(response)), (operation, response.content)
        return response

    def parsed(self, tag: str, operation: str, *args, **kwargs):
        return self.call(tag, operation, *args, **kwargs).parsed


def _json(response) -> Any:
    import json

    return json.loads(response.content)


def _known(value: Any, open_models: set[str]) -> None:
    """No object of the answer holds a field its model does not declare (the generated models
    keep such fields in `additional_properties`, where a typed client cannot see them)."""
    if isinstance(value, list | tuple):
        for item in value:
            _known(item, open_models)
    elif isinstance(value, dict):
        for item in value.values():
            _known(item, open_models)
    elif attrs.has(type(value)):
        declared = [field.name for field in attrs.fields(type(value)) if field.name != "additional_properties"]
        extra = getattr(value, "additional_properties", {})
        if declared and type(value).__name__ not in open_models:
            assert not extra, f"{type(value).__name__} does not know {sorted(extra)}"
        for name in declared:
            _known(getattr(value, name), open_models)
        _known(extra, open_models)


def _same(model: Any, sent: Any) -> bool:
    """The model gives back what the server sent (times as the same instants)."""
    if isinstance(model, dict) and isinstance(sent, dict):
        return model.keys() == sent.keys() and all(_same(model[key], sent[key]) for key in sent)
    if isinstance(model, list) and isinstance(sent, list):
        return len(model) == len(sent) and all(_same(a, b) for a, b in zip(model, sent, strict=True))
    if isinstance(model, str) and isinstance(sent, str) and model != sent:
        try:
            return datetime.fromisoformat(model) == datetime.fromisoformat(sent)
        except ValueError:
            return False
    return model == sent and type(model) is type(sent)


def _until(predicate, *, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def _cursor(next_url: str | None) -> str | None:
    return parse_qs(urlsplit(next_url).query)["cursor"][0] if next_url else None


def test_a_generated_client_drives_the_api(api):
    m = api.m
    now = datetime.now(UTC)
    noop, sleep = m.TargetRequest(handler="noop"), m.TargetRequest(handler="sleep")

    # What a job may name is the server's to say.
    handlers = api.parsed("handlers", "handlers_list")
    assert {"noop", "sleep"} <= {handler.name for handler in handlers.results}
    assert "default" in {pool.pool for pool in api.parsed("pools", "pools_list").results}

    # --- Each type of job, and a workflow -------------------------------------------------------
    event_filter = m.EventFilter.from_dict({"currency": "EUR"})
    steps = m.WorkflowRequest(
        steps=[
            m.WorkflowStepRequest(name="extract", target=noop),
            m.WorkflowStepRequest(name="load", target=noop, depends_on=["extract"]),
        ]
    )
    bodies = {
        "once": m.JobOnceTargetRequest(
            name="c once", type_=m.JobTypeEnum.ONCE, run_at=now + timedelta(hours=1), target=noop
        ),
        "delayed": m.JobDelayedTargetRequest(
            name="c delayed", type_=m.JobTypeEnum.DELAYED, delay_sec=3600, target=noop
        ),
        "cron": m.JobCronTargetRequest(
            name="c cron", type_=m.JobTypeEnum.CRON, schedule="*/5 * * * *", timezone="Europe/London", target=noop
        ),
        "interval": m.JobIntervalTargetRequest(
            name="c interval", type_=m.JobTypeEnum.INTERVAL, every_sec=900, target=noop
        ),
        "event": m.JobEventTargetRequest(
            name="c event", type_=m.JobTypeEnum.EVENT, on="client.paid", filter_=event_filter, target=noop
        ),
        "workflow": m.JobCronWorkflowRequest(
            name="c workflow", type_=m.JobTypeEnum.CRON, schedule="0 2 * * *", workflow=steps
        ),
    }
    jobs = {}
    for name, body in bodies.items():
        created = api.call("jobs", "jobs_create", body=body, status=201)
        jobs[name] = created.parsed
        assert created.headers["Location"].endswith(f"/v1/jobs/{jobs[name].job_id}")
        assert jobs[name].type_ == body.type_ and jobs[name].state == m.JobStateEnum.ACTIVE
    assert jobs["workflow"].workflow.steps[1].depends_on == ["extract"]
    assert jobs["event"].filter_["currency"] == "EUR"

    # --- A backfill of the cron job's past hour: its plan, then the backfill itself ---------------
    hour = datetime(2026, 3, 1, 10, tzinfo=UTC)
    asked = {"from_": hour, "to": hour + timedelta(hours=1), "max_concurrent": 2}
    cron_id = jobs["cron"].job_id
    plan = api.parsed("jobs", "jobs_backfill", cron_id, body=m.NewBackfillRequest(**asked, dry_run=True))
    assert isinstance(plan, m.BackfillPlan) and len(plan.fires) == 12  # every 5 minutes
    assert {fire.action for fire in plan.fires} == {m.BackfillFireActionEnum.RUN}
    made = api.parsed("jobs", "jobs_backfill", cron_id, body=m.NewBackfillRequest(**asked), status=201)
    assert made.state == m.BackfillStateEnum.RUNNING and made.counts.fires == 12
    assert api.parsed("backfills", "backfills_retrieve", made.backfill_id).max_concurrent == 2
    listed = api.parsed("jobs", "jobs_backfills_list", cron_id).results
    assert [backfill.backfill_id for backfill in listed] == [made.backfill_id]
    assert api.parsed("backfills", "backfills_cancel", made.backfill_id).state == m.BackfillStateEnum.CANCELLED

    # --- A list, a page at a time ---------------------------------------------------------------
    seen, cursor = [], None
    while True:
        page = api.parsed("jobs", "jobs_list", page_size=4, cursor=cursor or api.unset)
        seen += [job.job_id for job in page.results]
        if (cursor := _cursor(page.next_)) is None:
            break
    assert len(seen) == len(set(seen)) and {job.job_id for job in jobs.values()} <= set(seen)
    crons = api.parsed("jobs", "jobs_list", type_=[m.JobTypeEnum.CRON], state=[m.JobStateEnum.ACTIVE])
    assert {job.type_ for job in crons.results} == {m.JobTypeEnum.CRON}

    # --- Read, change with If-Match; a second writer with the old ETag is refused ---------------
    cron_id = jobs["cron"].job_id
    read = api.call("jobs", "jobs_retrieve", cron_id)
    assert isinstance(read.parsed, m.JobDetailOutput)
    tag = read.headers["ETag"]
    changed = api.call(
        "jobs",
        "jobs_partial_update",
        cron_id,
        body=m.PatchedJobUpdateRequest(priority=m.PriorityEnum.HIGH),
        if_match=tag,
    )
    assert changed.parsed.priority == m.PriorityEnum.HIGH and changed.headers["ETag"] != tag
    stale = api.call(
        "jobs", "jobs_update", cron_id, body=m.PatchedJobUpdateRequest(timeout_sec=60), if_match=tag, status=412
    )
    assert stale.parsed.code == "precondition_failed"

    # --- Pause; resume's dry run, then resume ---------------------------------------------------
    paused = api.call("jobs", "jobs_pause", cron_id, if_match=changed.headers["ETag"])
    assert paused.parsed.state == m.JobStateEnum.PAUSED
    preview = api.parsed("jobs", "jobs_resume", cron_id, dry_run=True)
    assert isinstance(preview, m.ResumePreview) and preview.dry_run and preview.state == m.JobStateEnum.PAUSED
    assert api.parsed("jobs", "jobs_resume", cron_id).state == m.JobStateEnum.ACTIVE

    # --- Trigger: the worker runs it ------------------------------------------------------------
    triggered = api.parsed("jobs", "jobs_trigger", cron_id)
    assert triggered.origin == m.OriginEnum.TRIGGER
    done = _until(
        lambda: (
            (e := api.parsed("executions", "executions_retrieve", triggered.execution_id)).state
            == m.ExecutionStateEnum.SUCCEEDED
            and e
        ),
        what="the triggered execution to succeed",
    )
    assert [event.to for event in done.events][-1] == m.ExecutionStateEnum.SUCCEEDED
    api.parsed("executions", "executions_logs_list", triggered.execution_id)
    assert triggered.execution_id in {
        e.execution_id for e in api.parsed("jobs", "jobs_executions_list", cron_id).results
    }

    # --- Cancel a running execution ---------------------------------------------------------------
    long = api.parsed(
        "jobs",
        "jobs_create",
        body=m.JobDelayedTargetRequest(
            name="c long",
            type_=m.JobTypeEnum.DELAYED,
            delay_sec=0,
            target=sleep,
            payload=m.Payload.from_dict({"seconds": 60}),
        ),
        status=201,
    )
    running = _until(
        lambda: [
            e
            for e in api.parsed("executions", "executions_list", job_id=UUID(long.job_id)).results
            if e.state == m.ExecutionStateEnum.RUNNING
        ],
        what="the sleep job to run",
    )[0]
    asked = api.parsed("executions", "executions_cancel", running.execution_id, status=202)
    assert asked.cancel_requested_at is not None
    _until(
        lambda: (
            api.parsed("executions", "executions_retrieve", running.execution_id).state
            == m.ExecutionStateEnum.CANCELLED
        ),
        what="the running execution to be cancelled",
    )

    # --- Bulk create ----------------------------------------------------------------------------------
    batch = api.parsed(
        "jobs",
        "jobs_bulk_create",
        body=m.JobBulkInputRequest(
            jobs=[
                m.JobDelayedTargetRequest(name=f"c bulk {n}", type_=m.JobTypeEnum.DELAYED, delay_sec=3600, target=noop)
                for n in range(3)
            ]
        ),
        status=201,
    )
    assert [job.name for job in batch.jobs] == ["c bulk 0", "c bulk 1", "c bulk 2"]

    # --- Previews: a cron schedule and an interval --------------------------------------------------
    cron_preview = api.parsed(
        "schedule", "schedule_preview_retrieve", schedule="30 2 * * *", timezone="Europe/London", count=3
    )
    assert len(cron_preview.fire_times) == 3 and cron_preview.timezone == "Europe/London"
    every = api.parsed("schedule", "schedule_preview_retrieve", every_sec=900, count=2)
    assert every.every_sec == 900 and len(every.fire_times) == 2

    # --- A workflow's runs --------------------------------------------------------------------------
    workflow_id = jobs["workflow"].job_id
    api.parsed("jobs", "jobs_trigger", workflow_id)
    run = _until(
        lambda: (
            (runs := api.parsed("jobs", "jobs_runs_list", workflow_id).results)
            and runs[0].state == m.RunStateEnum.SUCCEEDED
            and runs[0]
        ),
        what="the workflow's run to succeed",
    )
    assert [step.step for step in api.parsed("runs", "runs_retrieve", run.run_id).steps] == ["extract", "load"]

    # --- An event: the event job it matches runs -----------------------------------------------------
    accepted = api.parsed(
        "events",
        "events_create",
        body=m.EventInputRequest(name="client.paid", payload=m.EventInputRequestPayload.from_dict({"currency": "EUR"})),
        status=202,
    )
    assert accepted.matched == 1
    assert api.parsed("events", "events_retrieve", str(accepted.event_id)).source == m.SourceEnum.API
    api.parsed("events", "events_list")

    # --- The dead letter by error group (the seed left one) ------------------------------------------
    groups = api.parsed("dead_letter", "dead_letter_groups_list")
    assert groups.results, "the seed's DEAD execution makes a group"
    retried = api.parsed("dead_letter", "dead_letter_groups_retry", groups.results[0].fingerprint)
    assert retried.action == m.ActionEnum.RETRY and retried.done >= 1

    # --- Alert rules, and the seed's alert -------------------------------------------------------------
    email = m.AlertRuleInputRequestChannelsItemType1(type_=m.ChannelTypeEnum.EMAIL, to="ops@example.com")
    rule = api.parsed(
        "alerts",
        "alerts_rules_create",
        body=m.AlertRuleInputRequest(name="c failures", kind=m.KindEnum.FAILURE_RATE, threshold=50.0, channels=[email]),
        status=201,
    )
    assert rule.rule_id in {r.rule_id for r in api.parsed("alerts", "alerts_rules_list").results}
    off = api.parsed(
        "alerts", "alerts_rules_partial_update", str(rule.rule_id), body=m.PatchedAlertRuleUpdateRequest(enabled=False)
    )
    assert off.enabled is False
    api.call("alerts", "alerts_rules_destroy", str(rule.rule_id), status=204)
    alerts = api.parsed("alerts", "alerts_list")
    assert alerts.results and api.parsed("alerts", "alerts_retrieve", str(alerts.results[0].alert_id)).notifications
