"""A fork server for the roles the tests start: each role is forked from a process that has
already imported the heavy libraries (Django, Celery, DRF, psycopg…), instead of a fresh
interpreter importing them again.

A fresh role spends about 0.5 s of CPU importing before it reads its settings, and the suite
starts some 500 roles, on two cores, beside the tests: a fifth of CI's time. The server imports
only what reads nothing from the environment at import time (no project module, no settings, no
event loop or thread), so a forked role configures itself from its own environment exactly as a
fresh `python manage.py …` or `python -m celery …` would: the same argv, environment, working
directory, a session of its own (its process group is the role and its children), its output
where the caller says, atexit handlers and exit status as usual.

What a fork cannot give is refused, and the caller starts a fresh interpreter instead
(`forkable`): another program than this Python, or an interpreter-level setting (PYTHON*, LD_*,
libfaketime's FAKETIME*) other than the server's. TICKWORK_TEST_FORK_SERVER=0 turns it off.

One server per test process, started at its first role and ended when that process exits (it
reads its stdin until EOF). Protocol, one connection per role: the caller sends the role's
stdin/stdout/stderr as file descriptors with a length, then the request as JSON; the server
answers the role's pid, and its exit status (as Popen's returncode) when it has reaped it.
"""

import atexit
import importlib
import io
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

# Imported once in the server. Each must import without settings and start nothing (no thread,
# loop or connection): a module that reads the environment as it loads would read the server's.
PRELOAD = (
    "asyncio",
    "django.contrib.postgres.fields",
    "django.core.management",
    "django.db.backends.postgresql.base",
    "django.db.models",
    "django.forms",
    "django.http",
    "django.template",
    "django.urls",
    "celery.app.base",
    "celery.apps.worker",
    "celery.bin.celery",
    "celery.concurrency.prefork",
    "celery.worker",
    "kombu.transport.redis",
    "amqp",
    "psycopg",
    "psycopg_pool",
    "requests",
    "rest_framework.serializers",
    "opentelemetry.trace",
    "prometheus_client",
    "croniter",
)
# Read by the interpreter as it starts, so a fork keeps the server's: a role asking otherwise
# gets a fresh interpreter. PYTHONUNBUFFERED is the exception: a forked role applies it itself.
INTERPRETER_KEYS = ("PYTHON", "LD_", "FAKETIME")
_HEADER = struct.Struct("!I")
_STATUS = struct.Struct("!q")


def _interpreter_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(INTERPRETER_KEYS) and k != "PYTHONUNBUFFERED"}


def forkable(argv: Sequence[str], env: dict[str, str]) -> bool:
    """Whether the server can start `argv` as a fresh interpreter would."""
    if os.environ.get("TICKWORK_TEST_FORK_SERVER") == "0" or len(argv) < 2 or argv[0] != sys.executable:
        return False
    if not ((argv[1] == "-m" and len(argv) > 2) or argv[1].endswith(".py")):
        return False
    return _interpreter_env(env) == _interpreter_env(dict(os.environ))


# --- the caller's side ----------------------------------------------------------------------------


class Forked:
    """A role the server forked, answering as the subprocess.Popen of a fresh one would."""

    def __init__(self, args: list[str], pid: int, channel: socket.socket) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._channel = channel

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            self._channel.settimeout(timeout)
            try:
                data = self._channel.recv(_STATUS.size)
            except (TimeoutError, BlockingIOError):
                return None
            # The server gone without a word (killed): the role's status is lost with it.
            self.returncode = _STATUS.unpack(data)[0] if len(data) == _STATUS.size else 255
            self._channel.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Server:
    def __init__(self) -> None:
        folder = tempfile.mkdtemp(prefix="tickwork-zygote-")
        self.path = str(Path(folder) / "socket")
        env = {k: v for k, v in os.environ.items() if k.startswith(INTERPRETER_KEYS) or k in ("PATH", "HOME", "LANG")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "testing.zygote", self.path],
            cwd=Path(__file__).resolve().parents[1],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the fork server did not start: {self.process.wait()}")
        atexit.register(self.close)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # EOF: the server ends; the roles it started are the tests' to stop
        self.process.wait()

    def spawn(self, argv: list[str], *, cwd: Path, env: dict[str, str], stdout: IO, stderr: IO | None) -> Forked:
        request = json.dumps({"argv": argv[1:], "cwd": str(cwd), "env": env}).encode()
        channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        channel.connect(self.path)
        with open(os.devnull, "rb") as stdin:
            fds = [stdin.fileno(), stdout.fileno(), (stderr or stdout).fileno()]
            socket.send_fds(channel, [_HEADER.pack(len(request))], fds)
        channel.sendall(request)
        (pid,) = _STATUS.unpack(_recv_exactly(channel, _STATUS.size))
        return Forked(argv, pid, channel)


_server: _Server | None = None


def spawn(
    argv: list[str], *, cwd: Path, env: dict[str, str], stdout: IO, stderr: IO | None = None
) -> "subprocess.Popen | Forked":
    """Start `argv` in a session of its own with stdin from /dev/null and its output to `stdout`
    (and `stderr`, else the same): forked by the server where it can be, else a fresh process.
    Returns a Popen, or a Forked that answers as one."""
    global _server
    if not forkable(argv, env):
        return subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr or subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    if _server is None or _server.process.poll() is not None:
        _server = _Server()
    return _server.spawn(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr)


def _recv_exactly(channel: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = channel.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the fork server closed the connection")
        data += chunk
    return data


# --- the server's side ----------------------------------------------------------------------------


def _serve(path: str) -> dict | None:
    """Forks a role for each request until stdin closes. Returns, in a forked role only, its request."""
    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd hears of it
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
    channels: dict[int, socket.socket] = {}
    os.write(sys.stdout.fileno(), b"ready\n")
    while True:
        for key, _ in selector.select():
            if key.fileobj is listener:
                channel, _ = listener.accept()
                header, fds, _, _ = socket.recv_fds(channel, _HEADER.size, 3)
                request = json.loads(_recv_exactly(channel, _HEADER.unpack(header)[0]))
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for sock in (listener, channel, *channels.values()):
                        sock.close()
                    selector.close()
                    os.close(wake_read)
                    os.close(wake_write)
                    return {**request, "fds": fds}
                for fd in fds:
                    os.close(fd)
                channel.sendall(_STATUS.pack(pid))
                channels[pid] = channel
            elif key.fileobj == wake_read:
                os.read(wake_read, 4096)
                _reap(channels)
            elif not os.read(sys.stdin.fileno(), 4096):
                return None  # the test process has ended


def _reap(channels: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel = channels.pop(pid, None)
        if channel is not None:
            try:
                channel.sendall(_STATUS.pack(os.waitstatus_to_exitcode(status)))
            except OSError:
                pass  # the caller has gone
            channel.close()


def _become(request: dict) -> None:
    """In the forked child: become the role `request` asks for, as a fresh interpreter would."""
    os.setsid()
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
    for fd in set(request["fds"]) - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request["env"].get("PYTHONUNBUFFERED"):  # as `python -u` would: every write goes out at once
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, errors="backslashreplace")
    argv = request["argv"]
    if argv[0] == "-m":
        sys.argv = argv[1:]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path[0] = str(Path(argv[0]).resolve().parent)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    role = _serve(sys.argv[1])
    if role is not None:
        _become(role)  # the role runs here; its exit (SystemExit, atexit) is the interpreter's as usual
