"""Tracing in process (telemetry/tracing.py): a job made through the API, claimed and published
by the dispatcher's unit of work and run by the worker's runner, all here, with the spans kept in
memory. One trace links the request, the dispatch and the run; a workflow run's steps and a
retried execution's attempts stay in it; a cron job's next fire starts a trace of its own. With
tracing off nothing is stored, no span is made and the middleware is not in the chain.
The end-to-end test (tests_e2e/test_e2e_tracing.py) runs the same path in real processes."""

from datetime import timedelta

import pytest
from django.core.exceptions import MiddlewareNotUsed
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import testing.handlers_for_tests  # noqa: F401  (registers test-traced)
from events.tests.factories import event_job, workflow_event_job
from executions.models import Execution
from maintenance.services.lost_leases import LostLeases
from telemetry import tracing
from testing.harness import wait_for
from testing.steps import dispatch, start
from web.middleware import TracingMiddleware
from worker import runner
from worker.heartbeats import Heartbeats

pytestmark = pytest.mark.django_db(transaction=True)

OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


@pytest.fixture(scope="session")
def _memory():
    """One provider for the session (OpenTelemetry's global provider can be set once per
    process): the handlers' own spans go through the global one, as in a worker."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "tickwork-tests"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider, exporter


@pytest.fixture
def spans(_memory):
    """Tracing on for this test; the finished spans are `spans.get_finished_spans()`."""
    provider, exporter = _memory
    exporter.clear()
    tracing.use(provider)
    yield exporter
    tracing.use(None)


@pytest.fixture
def heartbeats(monkeypatch):
    """A heartbeat thread of the test's own, closed with its connection at the end (as in
    worker/tests/test_runner.py): the test database is dropped at the end of the session."""
    monkeypatch.setattr(Heartbeats, "_current", None, raising=False)
    yield
    thread = Heartbeats.current()
    if thread is not None:
        with thread.changed:
            thread.changed.notify()
        wait_for(lambda: thread.idle, timeout=5, what="the heartbeat thread to find no run")
        with thread.changed:
            pass


def _named(exporter, name):
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _one(exporter, name):
    (found,) = _named(exporter, name)
    return found


def _run_due(at):
    """The dispatcher's unit of work at `at`, then the worker's runner for each message it sent."""
    _, sent = dispatch(at)
    return [runner.run(execution_id=m.execution_id, lease_token=m.lease_token) for m in sent]


def _traceparent(span) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def test_one_trace_links_the_api_request_the_dispatch_and_the_run(spans, api, tenant, heartbeats):
    """POST /v1/jobs is a server span; `tickwork.create_job` inside it, whose context the execution
    stores; the dispatcher's `tickwork.dispatch` (claim → publish) and the worker's `tickwork.run`
    are its children, and the handler's own span is the run's child. All one trace."""
    now = timezone.now()
    created = api.post(
        "/v1/jobs",
        {"name": "traced", "type": "ONCE", "runAt": now.isoformat(), "target": {"handler": "test-traced"}},
        format="json",
        HTTP_TRACEPARENT="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    assert created.status_code == 201, created.content
    job_id = created.json()["jobId"]

    assert _run_due(now + timedelta(seconds=1)) == ["SUCCEEDED"]

    request = _one(spans, "POST /v1/jobs")
    names = ("tickwork.create_job", "tickwork.dispatch", "tickwork.run", "test.inner")
    create, sent, run, inner = (_one(spans, name) for name in names)
    # The caller's trace, continued from its traceparent header.
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {0x0AF7651916CD43DD8448EB211C80319C}
    assert request.parent.span_id == 0xB7AD6B7169203331 and request.kind == SpanKind.SERVER
    assert request.attributes["http.route"] == "/v1/jobs" and request.attributes["http.response.status_code"] == 201
    assert create.parent.span_id == request.context.span_id
    assert create.attributes["tickwork.job.id"] == job_id and create.attributes["tickwork.tenant.slug"] == "acme"
    execution = Execution.objects.get(job_id=job_id)
    assert execution.traceparent == _traceparent(create)
    assert sent.parent.span_id == create.context.span_id and sent.kind == SpanKind.PRODUCER
    assert sent.attributes["tickwork.execution.id"] == str(execution.pk)
    assert sent.attributes["tickwork.execution.attempt"] == 1 and sent.attributes["tickwork.pool"] == "default"
    assert run.parent.span_id == create.context.span_id and run.kind == SpanKind.CONSUMER
    assert sent.start_time <= sent.end_time <= run.start_time
    assert run.attributes == {
        "tickwork.execution.id": str(execution.pk),
        "tickwork.job.id": job_id,
        "tickwork.tenant.slug": "acme",
        "tickwork.pool": "default",
        "tickwork.execution.attempt": 1,
        "tickwork.handler": "test-traced",
        "tickwork.execution.outcome": "SUCCEEDED",
    }
    assert run.status.status_code == StatusCode.OK
    assert inner.parent.span_id == run.context.span_id
    detail = api.get(f"/v1/executions/{execution.pk}").json()
    assert detail["traceId"] == "0af7651916cd43dd8448eb211c80319c"


def test_a_workflow_runs_steps_are_all_in_the_trace_of_the_request_that_made_it(spans, api, heartbeats):
    """Every step carries its run's context: the second step, released when the first succeeds,
    is dispatched and run in the same trace, its run span a child of that context too."""
    now = timezone.now()
    steps = [
        {"name": "first", "target": {"handler": "test-traced"}},
        {"name": "second", "target": {"handler": "noop"}, "dependsOn": ["first"]},
    ]
    body = {"name": "flow", "type": "ONCE", "runAt": now.isoformat(), "workflow": {"steps": steps}}
    created = api.post("/v1/jobs", body, format="json")
    assert created.status_code == 201, created.content

    assert _run_due(now + timedelta(seconds=1)) == ["SUCCEEDED"]
    assert _run_due(now + timedelta(seconds=2)) == ["SUCCEEDED"]

    create = _one(spans, "tickwork.create_job")
    executions = {e.step: e for e in Execution.objects.filter(job_id=created.json()["jobId"])}
    assert {e.traceparent for e in executions.values()} == {_traceparent(create)}
    runs = {s.attributes["tickwork.step"]: s for s in _named(spans, "tickwork.run")}
    dispatches = {s.attributes["tickwork.execution.id"]: s for s in _named(spans, "tickwork.dispatch")}
    assert set(runs) == {"first", "second"} and set(dispatches) == {str(e.pk) for e in executions.values()}
    run_id = str(executions["first"].run_id)
    for name, step_run in runs.items():
        assert step_run.context.trace_id == create.context.trace_id
        assert step_run.parent.span_id == create.context.span_id
        assert step_run.attributes["tickwork.run.id"] == run_id
        assert step_run.attributes["tickwork.execution.id"] == str(executions[name].pk)
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {create.context.trace_id}


def test_a_failed_attempt_and_its_retry_are_spans_of_the_executions_trace(spans, api, heartbeats):
    """Attempt 1 fails: its run span is an error with the exception recorded. The retry is
    dispatched and run again in the same trace, under the same parent, and succeeds."""
    now = timezone.now()
    body = {
        "name": "flaky",
        "type": "ONCE",
        "runAt": now.isoformat(),
        "target": {"handler": "test-traced"},
        "payload": {"failFirst": True},
        "retryPolicy": {"maxAttempts": 2, "backoff": "FIXED", "initialDelayMs": 100, "jitter": False},
    }
    created = api.post("/v1/jobs", body, format="json")
    assert created.status_code == 201, created.content

    assert _run_due(now + timedelta(seconds=1)) == ["FAILED"]
    assert _run_due(now + timedelta(seconds=30)) == ["SUCCEEDED"]

    create = _one(spans, "tickwork.create_job")
    runs = sorted(_named(spans, "tickwork.run"), key=lambda s: s.attributes["tickwork.execution.attempt"])
    dispatches = _named(spans, "tickwork.dispatch")
    assert [s.attributes["tickwork.execution.attempt"] for s in runs] == [1, 2]
    assert sorted(s.attributes["tickwork.execution.attempt"] for s in dispatches) == [1, 2]
    for span in [*runs, *dispatches]:
        assert span.context.trace_id == create.context.trace_id and span.parent.span_id == create.context.span_id
    failed, succeeded = runs
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.status.description == "RuntimeError: failing the first attempt on purpose"
    assert failed.attributes["tickwork.execution.outcome"] == "FAILED"
    (exception,) = [e for e in failed.events if e.name == "exception"]
    assert exception.attributes["exception.type"] == "RuntimeError"
    assert succeeded.status.status_code == StatusCode.OK
    assert succeeded.attributes["tickwork.execution.outcome"] == "SUCCEEDED"
    assert Execution.objects.get(job_id=created.json()["jobId"]).state == "SUCCEEDED"


def test_runs_started_by_an_event_or_a_trigger_are_in_the_trace_of_that_request(spans, api, tenant):
    """POST /v1/events starts a plain event job's run and a workflow event job's steps, and
    POST /v1/jobs/{id}/trigger a run now: each execution stores the context of the request that
    started it."""
    event_job(tenant)
    workflow_event_job(tenant)
    answer = api.post("/v1/events", {"name": "invoice.paid", "payload": {}}, format="json")
    assert answer.status_code == 202, answer.content
    body = {"name": "later", "type": "DELAYED", "delaySec": 3600, "target": {"handler": "noop"}}
    job_id = api.post("/v1/jobs", body, format="json").json()["jobId"]
    triggered = api.post(f"/v1/jobs/{job_id}/trigger")
    assert triggered.status_code == 200, triggered.content

    event_request, trigger_request = _one(spans, "POST /v1/events"), _one(spans, "POST /v1/jobs/{job_id}/trigger")
    started = Execution.objects.filter(pk__in=answer.json()["executionIds"])
    assert len(started) == 3 and {e.traceparent for e in started} == {_traceparent(event_request)}
    assert Execution.objects.get(job_id=job_id, origin="TRIGGER").traceparent == _traceparent(trigger_request)


def test_a_run_whose_worker_was_lost_shows_the_sweepers_rescue_in_its_trace(spans, api):
    """The worker died with the run (so no run span ends): the sweeper's `tickwork.sweep` is in
    the execution's trace, an error naming what it did."""
    now = timezone.now()
    body = {"name": "lost", "type": "ONCE", "runAt": now.isoformat(), "target": {"handler": "noop"}}
    created = api.post("/v1/jobs", body, format="json")
    execution = Execution.objects.get(job_id=created.json()["jobId"])
    dispatch(now + timedelta(seconds=1))
    start(execution.pk, now=now + timedelta(seconds=1), lease=5, worker="gone:1")

    assert LostLeases(batch=10).run_once(now=now + timedelta(seconds=10)).lost == 1

    create, swept = _one(spans, "tickwork.create_job"), _one(spans, "tickwork.sweep")
    assert swept.context.trace_id == create.context.trace_id and swept.parent.span_id == create.context.span_id
    assert swept.attributes["tickwork.sweep.action"] == "worker_lost"
    assert swept.attributes["tickwork.worker.id"] == "gone:1"
    assert swept.attributes["tickwork.execution.attempt"] == 1
    assert swept.status.status_code == StatusCode.ERROR


@pytest.mark.parametrize("workflow", [False, True], ids=["plain", "workflow"])
def test_a_cron_jobs_next_fire_is_a_trace_of_its_own_linked_to_the_fire_before(spans, api, workflow):
    """The first fire is made by the request; the next, made by the dispatcher when it claims the
    first, is a new trace (`tickwork.fire`) linked to the first fire's context."""
    body = {"name": "every minute", "type": "CRON", "schedule": "* * * * *"}
    if workflow:
        body["workflow"] = {"steps": [{"name": "only", "target": {"handler": "noop"}}]}
    else:
        body["target"] = {"handler": "noop"}
    created = api.post("/v1/jobs", body, format="json")
    assert created.status_code == 201, created.content
    first = Execution.objects.get(job_id=created.json()["jobId"])

    dispatch(first.scheduled_for + timedelta(seconds=1))

    create, fire = _one(spans, "tickwork.create_job"), _one(spans, "tickwork.fire")
    assert first.traceparent == _traceparent(create)
    following = Execution.objects.filter(job_id=first.job_id).exclude(pk=first.pk).get()
    assert following.scheduled_for == first.scheduled_for + timedelta(minutes=1)
    assert following.traceparent == _traceparent(fire)
    assert fire.parent is None and fire.context.trace_id != create.context.trace_id
    assert [link.context.span_id for link in fire.links] == [create.context.span_id]
    assert fire.attributes["tickwork.job.id"] == str(first.job_id)


def test_with_tracing_off_nothing_is_stored_no_span_is_made_and_no_query_added(_memory, api, monkeypatch, heartbeats):
    """No OTEL_* variable: `setup` turns nothing on, the middleware leaves the chain, executions
    store no context and the path makes no span. Tracing on costs no query either: creating a
    job, its dispatch and its run make as many queries on as off."""
    provider, exporter = _memory
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def job_path(name):
        now = timezone.now()
        with CaptureQueriesContext(connection) as queries:
            created = api.post(
                "/v1/jobs",
                {"name": name, "type": "ONCE", "runAt": now.isoformat(), "target": {"handler": "noop"}},
                format="json",
            )
            assert created.status_code == 201, created.content
            assert _run_due(now + timedelta(seconds=1)) == ["SUCCEEDED"]
        return Execution.objects.get(job_id=created.json()["jobId"]), len(queries)

    assert tracing.setup("api") is False and not tracing.enabled()
    with pytest.raises(MiddlewareNotUsed):
        TracingMiddleware(lambda request: None)
    job_path("warm-up")  # what a first request, claim and run read once
    exporter.clear()

    untraced, queries_off = job_path("off")
    assert exporter.get_finished_spans() == ()
    tracing.use(provider)
    try:
        traced, queries_on = job_path("on")
    finally:
        tracing.use(None)

    assert untraced.traceparent == "" and traced.traceparent
    assert api.get(f"/v1/executions/{untraced.pk}").json()["traceId"] is None
    made = {s.name for s in exporter.get_finished_spans()}
    assert made == {"tickwork.create_job", "tickwork.dispatch", "tickwork.run"}
    assert queries_on == queries_off
