"""The processes the soak runs (web, dispatchers, sweepers, workers): started, watched, killed, stopped."""

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from soak.config import ROOT, SoakError, log

# --- Processes --------------------------------------------------------------------------------------


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


@dataclass
class Role:
    name: str
    kind: str  # web, dispatcher, sweeper, worker
    argv: list[str]
    popen: subprocess.Popen | None = None
    expected_exit: bool = False  # killed by the soak, not dead on its own
    frozen_until: float | None = None

    @property
    def pgid(self) -> int:
        return self.popen.pid  # a session of its own: the leader's pid is the group's id

    def members(self) -> list[int]:
        return group_members(self.pgid)

    def signal(self, sig: signal.Signals) -> None:
        # Only while the group has members: the id of a group that is gone may be reused.
        if self.members():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pgid, sig)

    def wait_gone(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while self.members() and time.monotonic() < deadline:
            time.sleep(0.02)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=1)


class Roles:
    """Every process the soak starts, each in a session of its own so that a signal to its group
    reaches its children (a Celery worker's pool) and nothing else."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.roles: list[Role] = []
        self.unexpected_exits: list[str] = []
        self.stopped = False

    def add(self, name: str, kind: str, argv: list[str]) -> Role:
        role = Role(name=name, kind=kind, argv=argv)
        self.roles.append(role)
        self.start(role)
        return role

    def start(self, role: Role) -> None:
        with open(self.log_dir / f"{role.name}.log", "ab") as out:
            role.popen = subprocess.Popen(
                role.argv,
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        role.expected_exit = False

    def of(self, kind: str) -> list[Role]:
        return [role for role in self.roles if role.kind == kind]

    def log_of(self, role: Role) -> str:
        path = self.log_dir / f"{role.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, role: Role) -> None:
        """SIGKILL the role's whole group and wait until it is gone."""
        role.expected_exit = True
        role.signal(signal.SIGKILL)
        role.wait_gone()
        role.frozen_until = None

    def watch(self) -> None:
        """A role that exits without the soak killing it is a finding: note it and restart it."""
        for role in self.roles:
            if role.popen.poll() is not None and not role.expected_exit:
                tail = "\n    ".join(self.log_of(role).splitlines()[-15:])
                self.unexpected_exits.append(f"{role.name} exited on its own with {role.popen.returncode}")
                log(f"{self.unexpected_exits[-1]}; restarting it. Its log ends:\n    {tail}")
                role.signal(signal.SIGKILL)  # what is left of it (a worker's pool processes)
                role.wait_gone()
                self.start(role)

    def stop_all(self, *, term_timeout: float = 10.0) -> list[str]:
        """SIGCONT and SIGTERM to every role's group, SIGKILL to what is left; returns the
        processes that survived both. Once only: a group id is not to be signalled once gone."""
        if self.stopped:
            return []
        self.stopped = True
        for role in self.roles:
            role.expected_exit = True
            role.signal(signal.SIGCONT)
            role.signal(signal.SIGTERM)
        deadline = time.monotonic() + term_timeout
        while time.monotonic() < deadline and any(role.members() for role in self.roles):
            time.sleep(0.1)
        for role in self.roles:
            if role.members():
                role.signal(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(role.members() for role in self.roles):
            time.sleep(0.1)
        for role in self.roles:
            with contextlib.suppress(subprocess.TimeoutExpired):
                role.popen.wait(timeout=1)
        return [f"{role.name}: {role.members()}" for role in self.roles if role.members()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate: Callable[[], object], *, timeout: float, what: str, interval: float = 0.2) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SoakError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
