"""The real processes a benchmark run starts (Celery workers, the dispatcher), their CPU, and waiting."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.config import ROOT, Config

# --- Processes --------------------------------------------------------------------------------------


class Processes:
    """Workers and the dispatcher, each in a session of its own, stopped by pid at the end."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        with open(self.log_dir / f"{name}.log", "w") as out:
            proc = subprocess.Popen(
                args, cwd=ROOT, env={**self.env, "TICKWORK_BENCH_ROLE": name, **(env or {})}, stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.procs.append((name, proc))
        return proc

    def worker(self, name: str, queue: str, cfg: Config, env: dict[str, str] | None = None) -> subprocess.Popen:
        """A Celery worker of the project's app. Tickwork's and the baseline's differ only in queue
        (and `env`, for the baseline on kombu's default transport)."""
        return self.start(
            name,
            [
                sys.executable, "-m", "celery", "-A", "scheduler_project", "worker",
                "-Q", queue, "-n", f"{name}@%h", "-P", "prefork", "-c", str(cfg.concurrency),
                "--prefetch-multiplier", str(cfg.prefetch),
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--include", "bench.baseline_tasks", "-l", "WARNING",
            ],
            env,
        )  # fmt: skip

    def stop_all(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: only what we started
                proc.wait()
        self.procs.clear()

    def stop(self, prefix: str) -> None:
        """Stop the processes whose names start with `prefix` (SIGTERM, then SIGKILL)."""
        for name, proc in [(n, p) for n, p in self.procs if n.startswith(prefix)]:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            self.procs.remove((name, proc))

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.log_dir / (name + '.log')}")


class CpuMeter:
    """CPU time spent by each role while a measurement runs, from /proc: where a job's cost goes.
    A process belongs to the role whose session it is in (each role starts a session of its
    own); PostgreSQL's and Redis's server processes are counted apart."""

    TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def __init__(self, procs: "Processes") -> None:
        self.procs = procs

    def snapshot(self) -> dict[str, float]:
        roles = {proc.pid: name for name, proc in self.procs.procs}
        totals: dict[str, float] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            pid, session = int(entry.name), int(fields[3])
            seconds = (int(fields[11]) + int(fields[12])) / self.TICK
            if pid == os.getpid():
                role = "feeder (this script)"
            elif session in roles:
                # A worker's main process (the consumer) apart from its pool processes.
                role = roles[session] + ("" if pid == session else " (children)")
            elif comm.startswith("postgres"):
                role = "postgresql"
            elif comm.startswith("redis"):
                role = "redis"
            else:
                role = "other"
            totals[role] = totals.get(role, 0.0) + seconds
        return totals

    @staticmethod
    def per_job(before: dict[str, float], after: dict[str, float], jobs: int) -> dict[str, float]:
        """CPU milliseconds per job, by role, largest first."""
        spent = {role: (after.get(role, 0.0) - before.get(role, 0.0)) * 1000 / jobs for role in after}
        return dict(sorted(((r, round(ms, 3)) for r, ms in spent.items() if ms > 0), key=lambda x: -x[1]))


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str, interval: float, procs=None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        if procs is not None:
            procs.check_alive()
        time.sleep(interval)
