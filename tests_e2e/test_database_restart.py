"""The database goes away and comes back (defect 10): every role waits for it and carries on,
and a worker process whose connection died does not lose its next delivery."""

import contextlib
import logging
import socket
import threading
import time
from datetime import timedelta

import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, connections
from django.utils import timezone

from background.loop import run_forever
from executions.models import Execution
from store import store
from testing.harness import events, execution_in, wait_for
from testing.steps import capacity


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _Stop:
    """A stop flag for `run_forever` that records its waits instead of sleeping them."""

    def __init__(self, after: int) -> None:
        self.after, self.waits = after, []
        self.event = self

    @property
    def stopping(self) -> bool:
        return len(self.waits) >= self.after

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.mark.django_db  # the loop closes broken connections after a failure
def test_defect10_a_role_waits_for_the_database_with_one_line_not_a_traceback_per_try(caplog):
    """While the database is unreachable a role's loop tries again after a growing pause and
    says so once (then once a minute), without a traceback; it says when it works again."""
    calls = []

    def step() -> float:
        calls.append(1)
        if len(calls) <= 5:
            raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')
        return 1.0

    stop = _Stop(after=6)
    with caplog.at_level(logging.INFO, logger="background.loop"):
        run_forever(name="sweeper", step=step, stop=stop)

    assert stop.waits == [0.5, 1.0, 2.0, 4.0, 8.0, 1.0]
    waiting = [r for r in caplog.records if "waiting for the database" in r.getMessage()]
    assert len(waiting) == 1 and "Connection refused" in waiting[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]
    assert any("working again" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db
def test_defect10_a_listener_made_while_the_database_is_down_does_not_raise_and_polls(monkeypatch, caplog):
    """The dispatcher's listener is made before its loop starts: with PostgreSQL down it must
    not raise (the dispatcher exited); it polls, and tries to listen again later, not on every
    wait."""
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    params = {**connection.get_connection_params(), "host": "127.0.0.1", "port": _free_port()}
    monkeypatch.setattr(connections[DEFAULT_DB_ALIAS], "get_connection_params", lambda: params)
    slept = []

    listener = store().due_listener()
    try:
        for _ in range(3):
            assert listener.wait(0.25, sleep=slept.append) is None
    finally:
        listener.close()

    assert slept == [0.25] * 3
    tries = [r for r in caplog.records if "listening for due work failed" in r.getMessage()]
    assert len(tries) == 2  # made (and at once once more, as after a drop); then it waits a pause


class _NotYetPostgres:
    """A TCP port that forwards to PostgreSQL only once opened: a database that is not up yet."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.port, self.target = _free_port(), target
        self.server: socket.socket | None = None
        self.sockets: list[socket.socket] = []

    def open(self) -> None:
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Shut down, then close: a close alone leaves a thread's blocked recv (and so the
        PostgreSQL session behind it) in place, and the test database could not be dropped."""
        for sock in [self.server, *self.sockets]:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()


@pytest.fixture
def not_yet_postgres(live):
    s = connection.settings_dict
    proxy = _NotYetPostgres((s["HOST"] or "127.0.0.1", int(s["PORT"] or 5432)))
    yield proxy
    proxy.close()


@pytest.mark.e2e
def test_defect10_dispatcher_started_before_the_database_waits_for_it_then_dispatches(
    live, not_yet_postgres, tenant, make_job
):
    """`run_dispatcher` started while nothing answers on the database's port stays up and logs
    that it waits (it used to exit with a traceback); once the database is there, it dispatches."""
    if connection.vendor != "postgresql":
        pytest.skip("a database server that is not there yet is PostgreSQL's case (SQLite is a file)")
    s = connection.settings_dict
    dispatcher = live.dispatcher(
        env={
            "DATABASE_URL": f"postgres://{s['USER']}@127.0.0.1:{not_yet_postgres.port}/{s['NAME']}",
            # The in-process worker below stays live however long the dispatcher's pause lasts.
            "TICKWORK_WORKER_OFFLINE_SECONDS": "600",
            # Each try waits this long for the pool's connection (10 s by default), and the pool
            # tries to connect again at growing intervals: 2 s, so that the test waits 10 s, not 30.
            "DATABASE_POOL_TIMEOUT": "2",
        }
    )

    def waiting() -> bool:
        assert dispatcher.alive(), f"the dispatcher exited:\n{dispatcher.tail()}"
        return "waiting for the database" in dispatcher.log()

    wait_for(waiting, timeout=60, interval=0.1, what="the dispatcher to wait for the database")
    time.sleep(2)
    assert dispatcher.alive(), dispatcher.tail()
    assert "Traceback" not in dispatcher.log()
    assert "(unavailable for 2s)" in dispatcher.log()  # since its first try, which waited 2 s for the pool

    execution = Execution.objects.get(job=make_job(tenant, run_at=timezone.now()))
    capacity(timezone.now())  # a worker to admit it to
    not_yet_postgres.open()
    wait_for(lambda: execution_in(execution.pk, "QUEUED"), timeout=30, what="the dispatcher to claim once it can")
    wait_for(lambda: "dispatcher: working again" in dispatcher.log(), timeout=10, what="it to say it works again")


@pytest.mark.e2e
def test_defect10_after_the_database_drops_its_connections_the_next_delivery_runs_at_once(
    live, tenant, make_job, settings
):
    """A PostgreSQL restart ends every connection. The worker process's next delivery finds its
    connection dead: it starts the run again on a new one at once, instead of losing the
    delivery and leaving the run to wait for the publish grace (20 s here) and a re-publish."""
    if connection.vendor != "postgresql":
        pytest.skip("ending the roles' connections is PostgreSQL's case (pg_terminate_backend)")
    grace = 20.0
    settings.TICKWORK_PUBLISH_GRACE_SECONDS = grace
    slow_republish = {"TICKWORK_PUBLISH_GRACE_SECONDS": str(grace)}
    live.worker(concurrency=1, wait=False)  # one process: the one whose connection is cut
    live.dispatcher(env=slow_republish)
    live.sweeper(env=slow_republish)
    live.ready()
    first = Execution.objects.get(job=make_job(tenant, run_at=timezone.now()))
    wait_for(lambda: execution_in(first.pk, "SUCCEEDED"), timeout=30, what="a first run (the worker connects)")

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchall(), "no role's connection was there to end"
    # The test process's own pooled connections were ended too: start it afresh, as a role's
    # pool does by discarding them.
    connection.close_pool()
    time.sleep(0.5)  # let the ends reach the roles' sockets
    second = Execution.objects.get(job=make_job(tenant, name="after the restart", run_at=timezone.now()))

    done = wait_for(lambda: execution_in(second.pk, "SUCCEEDED"), timeout=grace / 2, what="the next run")
    assert done.started_at - done.queued_at < timedelta(seconds=grace / 2)
    assert [e.to_state for e in events(done.pk)] == ["PENDING", "QUEUED", "RUNNING", "SUCCEEDED"]  # not re-published
