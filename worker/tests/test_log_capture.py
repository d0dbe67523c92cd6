"""What a handler logs is kept with its attempt (worker/log_capture.py): the real runner runs
in-process, on whichever database the tests run; the LogWriter thread writes with a connection
of its own, so these tests commit (transaction=True)."""

import logging
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import testing.handlers_for_tests  # noqa: F401  (registers test-logs and test-logs-threads)
from executions import logs
from executions.models import Execution, ExecutionLog
from readmodels.logs import log_dropped, log_lines
from testing.harness import wait_for
from testing.steps import claim
from worker import log_capture, runner
from worker.context import HandlerContext

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def writer(monkeypatch):
    """A LogWriter of the test's own, idle (and so without a connection) when the test ends: the
    test database is emptied and, at the end of the session, dropped."""
    monkeypatch.setattr(log_capture.LogWriter, "_current", None, raising=False)
    yield
    thread = log_capture.LogWriter.current()
    if thread is not None:
        wait_for(lambda: thread.idle, timeout=10, what="the log writer to be idle")


def _run(tenant, make_job, handler: str, payload: dict | None = None) -> Execution:
    make_job(tenant, run_at=timezone.now() - timedelta(seconds=1), handler=handler, payload=payload or {})
    (sent,) = claim(timezone.now())
    runner.run(execution_id=sent.execution_id, lease_token=sent.lease_token)
    return Execution.objects.get(pk=sent.execution_id)


def _lines(execution) -> list[tuple]:
    return list(
        ExecutionLog.objects.filter(execution=execution)
        .order_by("attempt", "seq")
        .values_list("attempt", "seq", "level", "logger", "message")
    )


def test_the_handlers_thread_and_its_ctx_log_are_kept_and_no_other_threads_records(tenant, make_job):
    """Kept: the records of the handler's thread (any logger) and ctx.log from any thread, in the
    order logged, seq from 1, each at its level; the ctx.log lines under the handler's name. Not
    kept: a thread the handler started that logs through logging, and a thread of the process
    that logs all along (a heartbeat's, Celery's). Lines reach the database while the handler
    still runs (the LogWriter), not only at its end."""
    chatter_stop = threading.Event()
    noise = logging.getLogger("testing.handlers_for_tests")

    def chatter() -> None:
        while not chatter_stop.is_set():
            noise.warning("another thread of the worker process")
            chatter_stop.wait(0.005)

    chatty = threading.Thread(target=chatter)
    chatty.start()
    try:
        execution = _run(tenant, make_job, "test-logs-threads")
    finally:
        chatter_stop.set()
        chatty.join()

    assert execution.state == "SUCCEEDED"
    assert execution.result == {"writtenWhileRunning": True}
    assert _lines(execution) == [
        (1, 1, "WARNING", "testing.handlers_for_tests", "from the handler's thread"),
        (1, 2, "INFO", "test-logs-threads", "ctx.log from a thread the handler started"),
        (1, 3, "DEBUG", "test-logs-threads", "ctx.log with a NUL \\u0000 and a lone surrogate \\ud800"),
    ]


def test_lines_past_the_bound_are_counted_and_one_line_says_so(tenant, make_job, settings):
    """TICKWORK_LOG_LINES_PER_ATTEMPT = 5 and a handler that logs 12 lines: the first 5 are kept,
    then one WARNING line of `tickwork` (seq 6) says 7 more were not kept."""
    settings.TICKWORK_LOG_LINES_PER_ATTEMPT = 5

    execution = _run(tenant, make_job, "test-logs", {"lines": 6})

    lines = _lines(execution)
    assert [seq for _, seq, *_ in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[0][2:] == ("INFO", "test-logs", "attempt 1: line 1 by ctx.log")
    assert lines[1][2:] == ("INFO", "testing.handlers_for_tests", "attempt 1: line 1 by logging")
    assert lines[5][2:] == (
        "WARNING",
        "tickwork",
        "7 more lines not kept: an attempt keeps at most 5 lines (TICKWORK_LOG_LINES_PER_ATTEMPT)",
    )
    assert log_dropped(execution=execution) == {1: 7}


def test_a_long_line_is_cut_to_its_bytes_and_says_how_much_was_cut(settings, tenant, make_job):
    """TICKWORK_LOG_LINE_BYTES = 200: a 1,000-character line of two-byte characters is kept as
    at most 200 bytes of UTF-8, whole characters, with a note of the bytes it lost."""
    log = log_capture.AttemptLog(execution_id="x", attempt=1, name="h", limit=10, line_bytes=200)
    log.add("INFO", None, "é" * 1000)

    (line,) = log._pending
    assert len(line.message.encode()) <= 200
    kept = line.message.split(" … ")[0]
    assert set(kept) == {"é"}
    assert line.message.endswith(f"[{2000 - len(kept.encode())} more bytes not kept]")


def test_a_delivery_after_a_release_continues_the_attempts_lines_and_its_bound(tenant, make_job):
    """A worker shutting down releases its run; the next delivery of the same attempt continues
    its seqs after the stored ones, and the attempt's bound counts both deliveries' lines."""
    execution = make_job(tenant).executions.get()
    first = log_capture.AttemptLog(execution_id=str(execution.pk), attempt=1, name="h", limit=5, line_bytes=100)
    for n in range(3):
        first.add("INFO", None, f"first {n}")
    first.flush()
    second = log_capture.AttemptLog(execution_id=str(execution.pk), attempt=1, name="h", limit=5, line_bytes=100)
    for n in range(3):
        second.add("INFO", None, f"second {n}")
    second.flush()

    assert [(seq, message) for _, seq, _, _, message in _lines(execution)] == [
        (1, "first 0"),
        (2, "first 1"),
        (3, "first 2"),
        (4, "second 0"),
        (5, "second 1"),
        (6, "1 more line not kept: an attempt keeps at most 5 lines (TICKWORK_LOG_LINES_PER_ATTEMPT)"),
    ]


def test_a_batch_is_one_insert_and_the_marker_is_brought_up_to_date(tenant, make_job):
    """100 lines are written in one INSERT (after one read of where the attempt's lines stand);
    lines dropped later update the marker's count rather than adding lines."""
    execution = make_job(tenant).executions.get()
    log = log_capture.AttemptLog(execution_id=str(execution.pk), attempt=1, name="h", limit=100, line_bytes=100)
    for n in range(100):
        log.add("INFO", None, f"line {n}")

    with CaptureQueriesContext(connection) as queries:
        log.flush()

    statements = [q["sql"].split()[0] for q in queries.captured_queries]
    assert [s for s in statements if s not in ("BEGIN", "COMMIT")] == ["SELECT", "INSERT"], statements
    assert ExecutionLog.objects.filter(execution=execution).count() == 100
    log.add("INFO", None, "one too many")
    log.flush()
    log.add("INFO", None, "and another")
    log.flush()
    assert ExecutionLog.objects.filter(execution=execution).count() == 101
    assert log_dropped(execution=execution) == {1: 2}


def test_a_failed_write_neither_fails_the_handler_nor_the_run(tenant, make_job, monkeypatch, caplog):
    """The database refuses the lines: the run still SUCCEEDED, and the worker's own log says
    which lines were lost."""

    def refuse(**kwargs):
        raise RuntimeError("the database said no")

    monkeypatch.setattr(logs, "log_lines_write", refuse)

    execution = _run(tenant, make_job, "test-logs")

    assert execution.state == "SUCCEEDED"
    assert not ExecutionLog.objects.filter(execution=execution).exists()
    assert "log line(s) of execution" in caplog.text


def test_lines_of_an_attempt_whose_lease_moved_on_stay_that_attempts(tenant, make_job):
    """A worker still writing attempt 1's lines after attempt 2 began (its lease was reclaimed)
    writes them under attempt 1: they are never shown as attempt 2's."""
    execution = make_job(tenant).executions.get()
    Execution.objects.filter(pk=execution.pk).update(attempt=2)  # as a retry leaves it
    stale = log_capture.AttemptLog(execution_id=str(execution.pk), attempt=1, name="h", limit=10, line_bytes=100)
    stale.add("INFO", None, "late line of attempt 1")
    stale.flush()

    assert list(log_lines(execution=execution, attempt=2)) == []
    assert [line.message for line in log_lines(execution=execution, attempt=1)] == ["late line of attempt 1"]


def test_ctx_log_outside_a_run_goes_to_the_standard_logging(caplog):
    """A context made outside a worker (a test, a shell) has no attempt to keep lines: ctx.log
    logs through `tickwork.handler` at the level named, INFO for a name logging does not know."""
    ctx = HandlerContext(execution_id="x", job_id="j", attempt=1, payload={}, tenant_slug="t", signing_secret="s")
    with caplog.at_level(logging.DEBUG, logger="tickwork.handler"):
        ctx.log("hello", level="warning")
        ctx.log("odd level", level="chatty")

    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("tickwork.handler", "WARNING", "hello"),
        ("tickwork.handler", "INFO", "odd level"),
    ]
