"""End-to-end: one tenant's unstorable outcome, in real Celery prefork workers (issue #10,
defects 1 and 2). The issue saw an `http` receiver answering 200 {"note": "\\u0000"} fail the
outcome statement of a whole batch: another tenant's runs went FAILED_WORKER_LOST and ran
again, and the webhook was called three times before it ended DEAD "worker lost"."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection
from django.utils import timezone

from executions.models import Execution, ExecutionEvent
from testing.harness import execution_in, history, wait_for

pytestmark = pytest.mark.e2e


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.calls.append(self.path)
        status, body = (200, b'{"note": "\\u0000"}') if self.path == "/nul-200" else (500, b"broken \x00 receiver")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:
        pass


@pytest.fixture
def receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.calls = []
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_defect1_a_nul_in_one_tenants_result_leaves_the_batch_recorded_once(
    live, tenant, other_tenant, make_job, receiver
):
    """One worker slot; its outcome thread is held until the next five runs have returned, so
    that their successes are recorded in one batch: tenant A's `http` run (receiver answers 200
    with a NUL) and four runs of tenant B. Every run SUCCEEDED at its first attempt, started
    once, none was reclaimed; the webhook was called once and its body stored escaped. Then a
    500 with a NUL in its body is recorded as that failure, at once, with the receiver's error."""
    if connection.vendor != "postgresql":
        pytest.skip("the outcome thread's batches are PostgreSQL's (on SQLite each outcome is recorded alone)")
    live.worker(concurrency=1, env={"TICKWORK_HTTP_ALLOW_PRIVATE": "true"}, wait=False)
    live.dispatcher()
    live.sweeper()
    live.ready()
    base = f"http://127.0.0.1:{receiver.server_address[1]}"
    hold = make_job(other_tenant, run_at=timezone.now(), handler="test-hold-outcomes", payload={"waitFor": 5})
    wait_for(lambda: execution_in(hold.executions.get().pk, "RUNNING"), timeout=15, what="the hold to start")
    now = timezone.now()
    jobs = [make_job(tenant, run_at=now, handler="http", payload={"url": f"{base}/nul-200"}, now=now)]
    jobs += [make_job(other_tenant, run_at=now, payload={"n": n}, now=now) for n in range(4)]
    ids = [job.executions.get().pk for job in [hold, *jobs]]

    wait_for(
        lambda: Execution.objects.filter(pk__in=ids, state="SUCCEEDED").count() == len(ids),
        timeout=30,
        what="every run of the batch to succeed",
    )

    for execution in Execution.objects.filter(pk__in=ids):
        assert (execution.attempt, execution.lease_token) == (1, 1), history(execution.pk)
        assert history(execution.pk).count(("QUEUED", "RUNNING")) == 1
    assert not ExecutionEvent.objects.filter(execution_id__in=ids, to_state="FAILED_WORKER_LOST").exists()
    assert Execution.objects.get(pk=ids[1]).result == {"status": 200, "body": {"note": "\\u0000"}}
    assert [Execution.objects.get(pk=ids[n]).result for n in range(2, 6)] == [{"n": n} for n in range(4)]
    assert receiver.calls == ["/nul-200"]

    url = f"{base}/nul-500"
    failing = make_job(tenant, run_at=timezone.now(), handler="http", payload={"url": url}, max_attempts=1)
    dead = wait_for(lambda: execution_in(failing.executions.get().pk, "DEAD"), timeout=15, what="the 500 to be DEAD")
    assert dead.error.endswith("broken \\u0000 receiver")
    assert ("RUNNING", "FAILED") in history(dead.pk) and ("RUNNING", "FAILED_WORKER_LOST") not in history(dead.pk)
    assert receiver.calls == ["/nul-200", "/nul-500"]
