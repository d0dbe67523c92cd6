"""The worker side of a pushed cancel, without processes or a database: which process the relay
signals, and what the signal does to the process's heartbeats (the end-to-end test is in
tests_e2e/test_e2e_cancel.py)."""

import os
import signal
import threading
import time
from types import SimpleNamespace

from testing.harness import wait_for
from worker import cancel_relay
from worker.cancel_relay import pid_to_signal
from worker.heartbeats import Heartbeats, _Beat, install_beat_now_signal


def test_the_relay_signals_only_a_process_of_its_own_worker_on_its_own_host():
    """The worker's main process or one of its pool processes; never another worker's process
    (on this host or another), and nothing for a worker id it cannot read."""
    mine = {"host": "h1", "own": 100, "children": [101, 102]}

    assert pid_to_signal("h1:101", **mine) == 101
    assert pid_to_signal("h1:100", **mine) == 100
    assert pid_to_signal("h1:103", **mine) is None  # another worker on this host
    assert pid_to_signal("h2:101", **mine) is None  # another host
    assert pid_to_signal("h1.example:101", **mine) is None
    assert pid_to_signal("worker-1", **mine) is None
    assert pid_to_signal("h1:", **mine) is None
    assert pid_to_signal("h1:x101", **mine) is None


def test_the_relay_sends_a_pool_process_the_beat_now_signal(monkeypatch):
    relay = cancel_relay.CancelRelay()
    sent = []
    monkeypatch.setattr(cancel_relay, "active_children", lambda: [SimpleNamespace(pid=4242), SimpleNamespace(pid=None)])
    monkeypatch.setattr(cancel_relay.os, "kill", lambda pid, sig: sent.append((pid, sig)))

    relay.relay(f"{relay.host}:4242")
    relay.relay(f"{relay.host}:4243")
    relay.relay(f"elsewhere-{relay.host}:4242")

    assert sent == [(4242, signal.SIGUSR2)]


def _heartbeats_with(*beats: _Beat) -> Heartbeats:
    heartbeats = Heartbeats()  # not started: beat_now only flags and notifies
    heartbeats.runs.update(beats)
    return heartbeats


def _beat(*, lease: float = 30.0, grace: float = 5.0) -> _Beat:
    return _Beat(SimpleNamespace(execution_id="e"), 1, lease=lease, grace=grace)  # type: ignore[arg-type]


def test_beat_now_makes_every_run_due_at_once_but_leaves_a_forced_stop_where_it_was():
    """A run that is beating normally is due now; a run already asked to stop keeps the time of
    its forced stop (bringing it forward would end the handler before its grace)."""
    beating, stopping = _beat(), _beat()
    stopping.stopping = True
    stopping.due = time.monotonic() + 5
    heartbeats = _heartbeats_with(beating, stopping)
    before = time.monotonic()

    heartbeats.beat_now()

    assert before <= beating.due <= time.monotonic() and beating.asked
    assert stopping.due > time.monotonic() + 4 and not stopping.asked


def test_a_beat_now_that_comes_during_a_beat_makes_another_beat_at_once(monkeypatch):
    """The beat under way may have read the row before the cancel request committed: the one
    asked for meanwhile still happens, rather than lease/3 later."""
    heartbeats = Heartbeats()
    beats, in_beat, release = [], threading.Event(), threading.Event()

    def fake_beat(beat):
        beats.append(time.monotonic())
        if len(beats) == 1:
            in_beat.set()
            release.wait(5)

    monkeypatch.setattr(heartbeats, "_beat", fake_beat)
    monkeypatch.setattr("worker.heartbeats.connection.close", lambda: None)  # no database here
    run = _beat(lease=30.0)
    run.due = time.monotonic()  # beat at once
    heartbeats.runs.add(run)
    heartbeats.start()
    assert in_beat.wait(5)

    heartbeats.beat_now()
    release.set()

    wait_for(lambda: len(beats) == 2, timeout=2, what="the second beat")
    assert beats[1] - beats[0] < 1  # not lease/3 = 10 s later
    heartbeats.remove(run)


def test_the_beat_now_signal_asks_this_process_s_heartbeats_to_beat(monkeypatch):
    asked = threading.Event()
    monkeypatch.setattr(Heartbeats, "current", classmethod(lambda cls: SimpleNamespace(beat_now=asked.set)))
    previous = signal.getsignal(signal.SIGUSR2)
    try:
        install_beat_now_signal()
        os.kill(os.getpid(), signal.SIGUSR2)
        assert asked.wait(2)
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_installing_the_handler_off_the_main_thread_does_nothing():
    """Celery's threads pool runs tasks on other threads, where signal.signal raises."""
    errors = []

    def install():
        try:
            install_beat_now_signal()
        except Exception as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    thread = threading.Thread(target=install)
    thread.start()
    thread.join()
    assert errors == []
