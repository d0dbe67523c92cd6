"""PostgreSQL clusters a test starts for itself: a primary (`initdb`) and its streaming replicas
(`pg_basebackup -R`), each on a free port of 127.0.0.1, in a folder removed after. Debian's
binaries (/usr/lib/postgresql/<version>/bin); as root, they run as the `postgres` user, since
PostgreSQL refuses to run as root."""

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg


def bin_dir() -> Path | None:
    """The folder of initdb, pg_ctl and pg_basebackup, or None when the machine has none."""
    found = shutil.which("pg_config")
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        candidates.insert(0, Path(out))
    return next((path for path in candidates if (path / "initdb").exists()), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, root: Path, name: str, bindir: Path) -> None:
        self.root, self.bindir = root, bindir
        self.data = root / name
        self.port = free_port()
        self.log = root / f"{name}.log"

    def run(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        command = [str(self.bindir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=True, timeout=60, **kwargs)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.url(dbname), autocommit=True, connect_timeout=5)

    def start(self) -> None:
        # The socket in the cluster's own folder, so that two clusters never share one.
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")


@contextlib.contextmanager
def primary_and_replica() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary (wal_level=replica, no fsync: a test's data) and a replica streaming from it,
    both running; both stopped and their folder removed after."""
    bindir = bin_dir()
    if bindir is None:
        raise FileNotFoundError("no PostgreSQL server binaries (initdb) on this machine")
    root = Path(tempfile.mkdtemp(prefix="tickwork-clusters-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
    primary, replica = Cluster(root, "primary", bindir), Cluster(root, "replica", bindir)
    try:
        primary.run("initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust", "--no-sync")
        with open(primary.data / "postgresql.conf", "a") as conf:
            conf.write("wal_level = replica\nmax_wal_senders = 4\nfsync = off\nsynchronous_commit = off\n")
            conf.write("full_page_writes = off\nshared_buffers = 32MB\n")
        primary.start()
        yield primary, replica
    finally:
        replica.stop("immediate")
        primary.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


def start_replica(primary: Cluster, replica: Cluster, *, timeout: float = 30) -> None:
    """Copy `primary` into `replica` (pg_basebackup -R: a standby that streams from it), start
    it, and wait until it is in recovery and streaming."""
    replica.run(
        "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
        "-D", str(replica.data), "-R", "-X", "stream", "-c", "fast", "--no-sync",
    )  # fmt: skip
    replica.start()
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(psycopg.OperationalError), replica.connect() as conn:
            row = conn.execute(
                "SELECT pg_is_in_recovery(), EXISTS (SELECT FROM pg_stat_wal_receiver WHERE status = 'streaming')"
            ).fetchone()
            if row == (True, True):
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"the replica did not stream within {timeout}s: {replica.log.read_text()[-2000:]}")
        time.sleep(0.1)


def caught_up(primary: Cluster, replica: Cluster, dbname: str = "postgres", *, timeout: float = 10) -> None:
    """Wait until the replica has replayed everything the primary has written so far."""
    with primary.connect(dbname) as conn:
        row = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        assert row is not None
        target = row[0]
    deadline = time.monotonic() + timeout
    with replica.connect(dbname) as conn:
        while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()[0]:  # type: ignore[index]
            if time.monotonic() > deadline:
                raise AssertionError("the replica did not catch up")
            time.sleep(0.05)
