"""A handler's outcome that the database cannot store as it is (issue #10, defects 1 and 2) is
recorded for that run alone, at once: never left RUNNING to be retried as "worker lost", and
never in the way of the other runs recorded with it. The real runner runs in-process."""

import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection, connections
from django.utils import timezone

import testing.handlers_for_tests  # noqa: F401  (registers test-nul-result)
from executions import transitions
from executions.models import Execution
from testing.steps import claim
from worker import outcomes, runner

pytestmark = pytest.mark.django_db(transaction=True)


class _Receiver(BaseHTTPRequestHandler):
    """A webhook receiver answering 200 with a NUL in its JSON, or 500 with one in its body."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.calls.append(self.path)
        status, content_type, body = {
            "/nul-200": (200, "application/json", b'{"note": "\\u0000", "lone": "\\ud800"}'),
            "/nul-500": (500, "text/plain", b"broken \x00 receiver"),
        }[self.path]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:
        pass


@pytest.fixture
def receiver(settings) -> Iterator[str]:
    settings.TICKWORK_HTTP_ALLOW_PRIVATE = True
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.calls = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _close_the_recorders_connection():
    yield
    if outcomes.OutcomeRecorder.current() is not None:
        # The recorder's thread keeps its own connection open (as it should in a worker); the
        # test database can be dropped only once it is closed, which only that thread can do.
        outcomes.OutcomeRecorder.of_process().submit(connections.close_all)
        assert outcomes.flush_outcomes(timeout=10)


def _running_soon(tenant, make_job, **job):
    make_job(tenant, run_at=timezone.now() - timedelta(seconds=1), **job)
    (sent,) = claim(timezone.now())
    return sent


def _run(sent) -> str | None:
    outcome = runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token, defer_success=True)
    assert outcomes.flush_outcomes(timeout=10)
    return outcome


def test_defect1_http_200_with_a_nul_in_its_json_is_recorded_succeeded(tenant, make_job, receiver):
    """The receiver answered 200: the run SUCCEEDED at once, its body stored with the NUL and
    the lone surrogate written out; the webhook was called once."""
    url = f"http://127.0.0.1:{receiver.server_address[1]}/nul-200"
    sent = _running_soon(tenant, make_job, handler="http", payload={"url": url})

    assert _run(sent) == "SUCCEEDED"

    execution = Execution.objects.get(pk=sent.execution_id)
    assert execution.state == "SUCCEEDED"
    assert execution.result == {"status": 200, "body": {"note": "\\u0000", "lone": "\\ud800"}}
    assert receiver.calls == ["/nul-200"]


def test_defect2_http_500_with_a_nul_in_its_body_is_recorded_as_that_failure(tenant, make_job, receiver):
    """The receiver answered 500 with a NUL in its body: the failure is recorded at once with the
    receiver's error (the NUL written out), and the retry policy applies (here: DEAD)."""
    url = f"http://127.0.0.1:{receiver.server_address[1]}/nul-500"
    sent = _running_soon(tenant, make_job, handler="http", payload={"url": url}, max_attempts=1)

    assert _run(sent) == "FAILED"

    execution = Execution.objects.get(pk=sent.execution_id)
    assert execution.state == "DEAD"
    assert execution.error.endswith("broken \\u0000 receiver")
    assert receiver.calls == ["/nul-500"]


def test_defect1_a_batch_that_still_fails_costs_no_other_run_its_outcome(tenant, other_tenant, make_job, monkeypatch):
    """Should a batch's statement fail anyway (here: an unstorable result let through), each run is
    recorded alone: the other tenant's runs SUCCEEDED with their results, and the run whose
    result cannot be stored SUCCEEDED too (a retry would repeat its work), with an error saying
    why in place of its result. None is left RUNNING for its lease to expire."""
    if connection.vendor != "postgresql":
        pytest.skip("the recorder's batches are PostgreSQL's")
    monkeypatch.setattr(transitions, "storable_json", lambda value: value)
    poison = _running_soon(tenant, make_job, handler="test-nul-result")
    good = [_running_soon(other_tenant, make_job, payload={"n": n}) for n in range(2)]
    recorder = outcomes.OutcomeRecorder.of_process()
    gate = threading.Event()
    recorder.submit(gate.wait)  # the three successes gather into one batch meanwhile
    for sent in (good[0], poison, good[1]):
        assert runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token, defer_success=True)

    gate.set()
    assert outcomes.flush_outcomes(timeout=10)

    rows = [Execution.objects.get(pk=sent.execution_id) for sent in (good[0], good[1], poison)]
    assert [(row.state, row.result, row.error) for row in rows[:2]] == [
        ("SUCCEEDED", {"n": 0}, ""),
        ("SUCCEEDED", {"n": 1}, ""),
    ]
    assert (rows[2].state, rows[2].result) == ("SUCCEEDED", None)
    assert rows[2].error.startswith("the handler's result could not be stored (DataError")
    assert all(row.job.standing == "COMPLETED" for row in rows)
