"""End-to-end: tracing configured by the standard OTEL_* variables only, in real processes. The
web role (daphne), a dispatcher and a Celery prefork worker export OTLP/HTTP to a small receiver
started here; the spans of one job, from the request to the run, arrive from the three processes
in one trace."""

import shutil
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from executions.models import Execution
from tenants.services import token_create
from testing.harness import execution_in, wait_for

pytestmark = pytest.mark.e2e


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP traces endpoint (POST /v1/traces, protobuf) that keeps what it is sent:
    per span, its service, name, ids and parent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Export)
        self.spans: list[dict] = []
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def received(self) -> list[dict]:
        with self.lock:
            return list(self.spans)


class _Export(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: a.value for a in span.attributes}
                    spans.append(
                        {
                            "service": resource.get("service.name"),
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_id": span.parent_span_id.hex(),
                            "execution_id": attributes["tickwork.execution.id"].string_value
                            if "tickwork.execution.id" in attributes
                            else None,
                        }
                    )
        with self.server.lock:
            self.server.spans.extend(spans)
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:  # quiet
        pass


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_one_jobs_spans_from_the_web_the_dispatcher_and_the_worker_share_one_trace(live, tenant, receiver):
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,  # nothing else: the SDK's defaults
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: spans reach the receiver soon after they end
    }
    live.worker(wait=False, env=otel)
    live.dispatcher(env=otel)
    live.ready()
    port = _free_port()
    daphne = shutil.which("daphne", path=str(Path(sys.executable).parent)) or "daphne"
    web = live.start(
        "web", [daphne, "-b", "127.0.0.1", "-p", str(port), "scheduler_project.asgi:application"], env=otel
    )
    base = f"http://127.0.0.1:{port}"

    def web_answers() -> bool:
        assert web.alive(), web.tail()
        try:
            return requests.get(f"{base}/v1/health", timeout=5).status_code in (200, 503)
        except requests.ConnectionError:
            return False

    wait_for(web_answers, timeout=60, interval=0.2, what="the web role to answer")
    _, token = token_create(tenant=tenant)
    created = requests.post(
        f"{base}/v1/jobs",
        json={"name": "traced", "type": "ONCE", "runAt": "2020-01-01T00:00:00Z", "target": {"handler": "noop"}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    execution = Execution.objects.get(job_id=created.json()["jobId"])
    wait_for(lambda: execution_in(execution.pk, "SUCCEEDED"), timeout=30, what="the job to run")

    order = ("POST /v1/jobs", "tickwork.create_job", "tickwork.dispatch", "tickwork.run")
    names = set(order)

    def all_spans() -> dict | None:
        ours = [s for s in receiver.received() if s["name"] in names]
        by_name = {s["name"]: s for s in ours if s["name"] != "POST /v1/jobs" or s["parent_id"] == ""}
        return by_name if set(by_name) == names else None

    spans = wait_for(all_spans, timeout=30, interval=0.1, what=f"the spans of {names} to be exported")
    request, create, sent, run = (spans[name] for name in order)
    assert {s["trace_id"] for s in spans.values()} == {request["trace_id"]}
    assert execution.traceparent.startswith(f"00-{create['trace_id']}-{create['span_id']}-")  # then its flags
    assert create["parent_id"] == request["span_id"]
    assert sent["parent_id"] == run["parent_id"] == create["span_id"]
    assert sent["execution_id"] == run["execution_id"] == str(execution.pk)
    assert (request["service"], create["service"], sent["service"], run["service"]) == (
        "tickwork-api",
        "tickwork-api",
        "tickwork-dispatcher",
        "tickwork-worker",
    )
