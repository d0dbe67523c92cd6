"""Procrastinate, a job queue on PostgreSQL, as a baseline of the end-to-end stage: its own
worker processes running a no-op task, on a database of its own on the same server.

A round defers `count` jobs in one batch (as Tickwork's round commits its jobs at once) while the
workers listen, and counts jobs per second from the batch's commit to the last job's success
(Procrastinate's events table). Its workers are as many processes as Tickwork's pool processes,
each with `PROCRASTINATE_CONCURRENCY` sub-workers (its async concurrency; a no-op task waits on
nothing but the database)."""

import os
import sys
import time

from bench.config import database_urls, log
from bench.processes import wait_for

PROCRASTINATE_CONCURRENCY = 4


class Procrastinate:
    def __init__(self, bench) -> None:
        self.bench, self.cfg = bench, bench.cfg
        self.name = f"{self.cfg.db_name}_procrastinate"
        self.admin_url, self.url = database_urls(os.environ.get("DATABASE_URL") or bench.db.url, self.name)
        self.conn = None

    def start(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{self.name}"')
        os.environ["TICKWORK_BENCH_PROCRASTINATE_URL"] = self.url
        from bench.procrastinate_app import app

        with app.open():
            app.schema_manager.apply_schema()
        self.conn = psycopg.connect(self.url, autocommit=True)
        env = {"TICKWORK_BENCH_PROCRASTINATE_URL": self.url}
        for i in range(self.cfg.concurrency):
            self.bench.procs.start(
                f"bench-procrastinate-{i}",
                [
                    sys.executable, "-m", "procrastinate", "--app", "bench.procrastinate_app.app",
                    "--log-level", "warning", "worker", "--queues", "bench",
                    "--concurrency", str(PROCRASTINATE_CONCURRENCY),
                ],
                env,
            )  # fmt: skip
        time.sleep(3)  # its workers log nothing at this level when ready; they poll too, so none is missed
        log(f"procrastinate: {self.cfg.concurrency} worker process(es) x {PROCRASTINATE_CONCURRENCY}")

    def round(self, count: int) -> float:
        from bench.procrastinate_app import app, noop

        self.conn.execute("TRUNCATE procrastinate_events, procrastinate_jobs CASCADE")
        with app.open():
            started = time.time()
            noop.batch_defer(*({} for _ in range(count)))
        wait_for(
            lambda: (
                self.conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'").fetchone()[0]
                >= count
            ),
            timeout=max(120, count / 20),
            what="the Procrastinate round",
            interval=0.05,
            procs=self.bench.procs,
        )
        last = self.conn.execute(
            "SELECT extract(epoch FROM max(at)) FROM procrastinate_events WHERE type = 'succeeded'"
        ).fetchone()[0]
        return count / (float(last) - started)

    def drop(self) -> None:
        import psycopg

        if self.conn is not None:
            self.conn.close()
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
