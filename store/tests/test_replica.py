"""Reads on a replica, decided without a database: which reads the router sends where
(store/replica/routing.py), and when the replica is fit to serve them (store/replica/health.py)."""

import logging
import threading

import pytest
from django.contrib.sessions.models import Session
from django.db import DEFAULT_DB_ALIAS, connections

from executions.models import Execution
from store.replica import health
from store.replica.health import Replay, ReplicaHealth, verdict
from store.replica.routing import PRIMARY_ONLY, REPLICA, UNKNOWN, ReadScope, ReplicaRouter, read_alias, read_scope
from tenants.models import ApiToken

router = ReplicaRouter()
PRIMARY = (None, DEFAULT_DB_ALIAS)  # the router's "the default database"
FIT = Replay(in_recovery=True, lag_seconds=0.0, streaming=True)


def _scope(*, client="tenant:1", usable=True, wrote=()):
    asked = []

    def is_usable():
        asked.append("usable")
        return usable

    def wrote_recently(who):
        asked.append(who)
        return who in wrote

    scope = ReadScope(client if callable(client) else (lambda: client), usable=is_usable, wrote_recently=wrote_recently)
    return scope, asked


def test_without_a_scope_every_read_is_the_primarys():
    """The dispatcher, the workers, the sweeper and a write request never open a scope."""
    assert router.db_for_read(Execution) in PRIMARY
    assert read_alias() == DEFAULT_DB_ALIAS


def test_a_scoped_read_goes_to_the_replica_and_the_decision_is_taken_once_per_request():
    scope, asked = _scope()
    with read_scope(scope):
        assert router.db_for_read(Execution) == REPLICA
        assert read_alias() == REPLICA
        assert router.db_for_read(Execution) == REPLICA
    assert asked == ["usable", "tenant:1"]  # one look at the health and one at the marker
    assert scope.read_replica
    assert router.db_for_read(Execution) in PRIMARY  # the scope is over


def test_authentication_and_authorisation_tables_stay_on_the_primary():
    """Sessions, users, tokens (their revocation), tenants (their quotas), login throttling."""
    scope, _ = _scope()
    assert {"auth", "sessions", "tenants", "axes"} <= PRIMARY_ONLY
    with read_scope(scope):
        assert router.db_for_read(Session) in PRIMARY
        assert router.db_for_read(ApiToken) in PRIMARY
        assert router.db_for_read(Execution) == REPLICA


def test_a_client_that_wrote_within_the_window_reads_the_primary_others_the_replica():
    writer, _ = _scope(client="tenant:1", wrote={"tenant:1"})
    other, _ = _scope(client="tenant:2", wrote={"tenant:1"})
    with read_scope(writer):
        assert router.db_for_read(Execution) in PRIMARY
    with read_scope(other):
        assert router.db_for_read(Execution) == REPLICA


def test_a_replica_unfit_to_serve_sends_the_whole_request_to_the_primary_without_asking_the_marker():
    scope, asked = _scope(usable=False)
    with read_scope(scope):
        assert router.db_for_read(Execution) in PRIMARY
        assert read_alias() == DEFAULT_DB_ALIAS
    assert asked == ["usable"]
    assert not scope.read_replica


def test_reads_before_the_credentials_are_checked_go_to_the_primary_and_are_decided_after():
    who = {"client": UNKNOWN}
    scope, asked = _scope(client=lambda: who["client"])
    with read_scope(scope):
        assert router.db_for_read(Execution) in PRIMARY
        who["client"] = "tenant:3"
        assert router.db_for_read(Execution) == REPLICA
    assert asked == ["usable", "usable", "tenant:3"]


def test_anonymous_reads_ask_no_marker():
    scope, asked = _scope(client="")
    with read_scope(scope):
        assert router.db_for_read(Execution) == REPLICA
    assert asked == ["usable"]


def test_after_a_write_the_requests_reads_are_the_primarys():
    scope, _ = _scope()
    with read_scope(scope):
        assert router.db_for_read(Execution) == REPLICA
        assert router.db_for_write(Execution) is None
        assert router.db_for_read(Execution) in PRIMARY


def test_reads_inside_a_transaction_on_the_primary_are_the_primarys(monkeypatch):
    """A read that decides a write (select, then update) must see the primary's rows."""
    monkeypatch.setattr(connections[DEFAULT_DB_ALIAS], "in_atomic_block", True)
    scope, _ = _scope()
    with read_scope(scope):
        assert router.db_for_read(Execution) in PRIMARY
        assert read_alias() == DEFAULT_DB_ALIAS


def test_the_replica_is_never_migrated_and_relations_span_both():
    assert router.allow_migrate(REPLICA, "executions") is False
    assert router.allow_migrate(DEFAULT_DB_ALIAS, "executions") is None
    assert router.allow_relation(object(), object()) is True


def test_scopes_are_per_context_not_per_process():
    """Another thread (another request, the dispatcher in a standalone process) sees no scope."""
    scope, _ = _scope()
    seen = []
    with read_scope(scope):
        thread = threading.Thread(target=lambda: seen.append(router.db_for_read(Execution)))
        thread.start()
        thread.join()
        assert router.db_for_read(Execution) == REPLICA
    assert seen[0] in PRIMARY


@pytest.mark.parametrize(
    ("replay", "reason"),
    [
        (FIT, None),
        (Replay(True, 2.9, True), None),
        (Replay(True, 3.5, True), "its replay is 3.5 s behind (bound 3 s)"),
        (Replay(True, float("inf"), True), "its replay is inf s behind (bound 3 s)"),
        (Replay(True, 0.0, False), "it is not streaming from the primary"),
        (Replay(False, 0.0, False), "it is not in recovery (not a replica)"),
    ],
)
def test_the_replicas_verdict(replay, reason):
    assert verdict(replay, max_lag=3) == reason


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_health_is_one_log_line_per_change_not_one_per_look(caplog):
    answers = [FIT, ConnectionError("connection refused"), ConnectionError("refused"), Replay(True, 9, True), FIT]

    def probe():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    replica = ReplicaHealth(probe, max_lag=3, interval=1, clock=_Clock())
    with caplog.at_level(logging.INFO, logger="store.replica.health"):
        seen = [replica.check() for _ in range(5)]

    assert seen == [True, False, False, False, True]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "replica: reads go to the primary: it does not answer: connection refused",
        "replica: reads on the replica again",
    ]


def test_looks_run_in_the_background_at_most_once_an_interval():
    """A request never waits on a look: it gets the last answer (none yet: the primary)."""
    clock, looks, release = _Clock(), [], threading.Event()

    def probe():
        looks.append(clock.now)
        release.wait(5)
        return FIT

    replica = ReplicaHealth(probe, max_lag=3, interval=1, clock=clock)
    assert replica.usable() is False  # the first look has started, not finished
    assert replica.usable() is False
    release.set()
    for _ in range(100):
        if replica._lock.acquire(timeout=0.05):
            replica._lock.release()
            break
    assert replica.usable() is True  # within the interval: no new look
    clock.now += 1.5
    replica.usable()
    replica._lock.acquire(timeout=5)
    replica._lock.release()
    assert looks == [100.0, 101.5]


def test_the_windows_floor_is_the_health_checks_interval():
    from scheduler_project.replica import LAG_CHECK_SECONDS

    assert health.CHECK_SECONDS == LAG_CHECK_SECONDS
