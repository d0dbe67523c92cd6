"""A PgBouncer in transaction mode in front of the machine's PostgreSQL, for the roles the tests and
the soak start: what production runs (README, "PgBouncer") is what they go through.

One per test process (or soak), started on a free port, serving every database of the server
(`* =`), so that each xdist worker's test database goes through it as it is. Debian's `pgbouncer`
(1.18 on this machine): no prepared statements in transaction mode, which the roles' settings
turn off when `DATABASE_DIRECT_URL` is set (scheduler_project/databases.py).
"""

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# Server connections per database and user. A test's roles hold one only for a transaction, so a
# few suffice; three test processes at once stay well inside max_connections (100) on CI.
POOL_SIZE = 15


def binary() -> str | None:
    # Debian installs it in /usr/sbin, which a user's PATH may leave out.
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")


def available() -> bool:
    return binary() is not None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PgBouncer:
    """`start()` it, point DATABASE_URL at `url(direct_url)`, `stop()` it."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 5432) -> None:
        self.upstream = (host, port)
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="tickwork-pgbouncer-"))
        self.process: subprocess.Popen | None = None

    @classmethod
    def upstream_of(cls, direct_url: str) -> "PgBouncer":
        """One in front of the server `direct_url` names."""
        parts = urlsplit(direct_url)
        return cls(host=parts.hostname or "127.0.0.1", port=parts.port or 5432)

    def url(self, direct_url: str) -> str:
        """`direct_url` (postgres://user@host:port/db) as it reaches the same database through this."""
        parts = urlsplit(direct_url)
        user = parts.netloc.rpartition("@")[0]
        netloc = f"{user}@127.0.0.1:{self.port}" if user else f"127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))

    def start(self, timeout: float = 10.0) -> "PgBouncer":
        host, port = self.upstream
        config = self.dir / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.dir / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {POOL_SIZE}\n"
            "max_client_conn = 2000\n"
            # Server connections left idle are closed soon: a test database is dropped at the end.
            "server_idle_timeout = 5\n"
            # psycopg sends none of these, but a client may; PgBouncer refuses what it does not know.
            "ignore_startup_parameters = extra_float_digits,options\n"
            # Its console (the database `pgbouncer`), where a test reads whom it serves.
            "admin_users = postgres\n" + (f"user = {self._user()}\n" if os.geteuid() == 0 else "")
            # PgBouncer will not run as root: it switches to this user after reading its files.
        )
        (self.dir / "users.txt").write_text('"postgres" ""\n')
        if os.geteuid() == 0:
            os.chown(self.dir, pwd.getpwnam(self._user()).pw_uid, -1)
        self.log = open(self.dir / "pgbouncer.log", "wb")  # closed in stop()
        argv = [binary() or "pgbouncer", str(config)]
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {(self.dir / 'pgbouncer.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"pgbouncer did not listen on {self.port} within {timeout} s")

    def clients(self, database: str) -> int:
        """How many client connections to `database` this PgBouncer holds now (SHOW CLIENTS)."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="pgbouncer", autocommit=True
        ) as console:
            cursor = console.cursor()
            cursor.execute("SHOW CLIENTS")
            column = [d.name for d in cursor.description].index("database")
            return sum(row[column] == database for row in cursor.fetchall())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: PgBouncer closes every connection and exits at once
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _user() -> str:
        return "postgres"
