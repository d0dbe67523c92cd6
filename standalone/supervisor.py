"""Standalone mode: every role on one machine, as supervised child processes.

The supervisor starts the web server, a dispatcher, a sweeper, an alerter and a Celery worker
serving every pool; restarts a child that dies (with a growing pause, logged); and on SIGINT/SIGTERM
stops them all. Each child leads its own process group, so stopping one also stops what it forked (Celery's
pool processes), and each is told by the kernel to stop if the supervisor itself dies.
"""

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from maintenance import registry

logger = logging.getLogger("tickwork.standalone")
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it if the supervisor goes away, even by SIGKILL."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:  # not Linux: Ctrl-C still reaches the children through the supervisor
        pass


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    log_path: Path | None = None
    log_file: BinaryIO | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None


class Supervisor:
    def __init__(self, children: list[Child], *, env: dict[str, str], log_dir: Path) -> None:
        self.children = children
        self.env = env
        self.log_dir = log_dir
        self.stopping = False

    def start(self, child: Child) -> None:
        child.log_path = self.log_dir / f"{child.name}.log"
        child.log_file = open(child.log_path, "ab")
        child.process = subprocess.Popen(
            child.argv,
            env=self.env,
            stdout=child.log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        child.started_at = time.monotonic()
        logger.info("started %s (pid %s), log %s", child.name, child.pid, child.log_path)

    def _reap(self, child: Child, process: subprocess.Popen) -> None:
        """A child exited: make sure nothing it forked lingers, then plan its restart."""
        code = process.returncode
        _kill_group(process.pid, signal.SIGKILL)
        if child.log_file:
            child.log_file.close()
        # A child that ran a while gets restarted at once; one that keeps crashing, slower.
        quick_crash = time.monotonic() - child.started_at < 10
        child.restarts += 1
        delay = min(30.0, 0.5 * 2 ** min(child.restarts, 6)) if quick_crash else 0.5
        child.next_start = time.monotonic() + delay
        child.process = None
        logger.warning("%s exited with %s; restarting in %.1fs (restart #%d)", child.name, code, delay, child.restarts)

    def run(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        for child in self.children:
            self.start(child)
        while not self.stopping:
            for child in self.children:
                if child.process is not None and child.process.poll() is not None and not self.stopping:
                    self._reap(child, child.process)
                if child.process is None and time.monotonic() >= child.next_start and not self.stopping:
                    self.start(child)
            time.sleep(0.2)
        self.stop()

    def _on_signal(self, signum, frame) -> None:
        if not self.stopping:
            logger.info("received %s; stopping every role", signal.Signals(signum).name)
        self.stopping = True

    def stop(self, timeout: float = 6.0) -> None:
        """SIGTERM every role's process group, and SIGKILL what is left after `timeout`: the
        whole stop stays well under the 10 s that service managers are commonly given, with room
        for a loaded machine (8 s once left too little). What matters is done in the first moments:
        the worker's pool processes release their runs back to PENDING and record their queued
        outcomes. Celery's main process can take longer than this to finish its own shutdown on the
        file broker (a 2 s poll, then joining the pool's threads: 7 s measured with no task at
        all); it holds no run, so ending it loses nothing (a message it had taken is re-published
        from its row)."""
        running = [(c, c.process) for c in self.children if c.process is not None]
        for _, process in running:
            _kill_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child, process in running:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop in %.0fs; killing it", child.name, timeout)
            # Whatever is left of the group (e.g. pool processes) goes too.
            _kill_group(process.pid, signal.SIGKILL)
            process.wait()
            if child.log_file:
                child.log_file.close()
        logger.info("all roles stopped")


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def role_commands(*, host: str, port: int, pools: list[str], concurrency: int) -> list[Child]:
    python = sys.executable
    manage = str(Path(__file__).resolve().parent.parent / "manage.py")
    celery = str(Path(python).with_name("celery"))
    queues = ",".join(f"tickwork.{pool}" for pool in pools)
    return [
        Child("web", [python, "-m", "daphne", "-b", host, "-p", str(port), "scheduler_project.asgi:application"]),
        Child("dispatcher", [python, manage, "run_dispatcher"]),
        # The roles of background services (maintenance/registry.py): the sweeper, the alerter.
        *(Child(role.kind, [python, manage, role.command]) for role in registry.ROLES),
        Child(
            "worker",
            [
                celery,
                "-A",
                "scheduler_project",
                "worker",
                "-Q",
                queues,
                "--concurrency",
                str(concurrency),
                "--hostname",
                "standalone@%h",
                "--loglevel",
                "INFO",
                "--without-mingle",
                "--without-gossip",
            ],
        ),
    ]
