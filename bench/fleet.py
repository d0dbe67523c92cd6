"""The fleet that stands in for workers where none runs (the statements, dispatch and cron stages):
a worker row in the registry (pools.models.Worker) with the slots the stage needs.

It reports as a real worker does (worker/registration.py): its `last_seen_at` is refreshed every
TICKWORK_WORKER_BEAT_SECONDS from a thread with a connection of its own. A row written once and
left alone went offline after TICKWORK_WORKER_OFFLINE_SECONDS (10 s): on a busy machine a dispatch
round (its insert, VACUUM and claims) took longer than that, the claims saw no capacity and the
run died with "dispatch round: claimed 24000, on the broker 24000, due 30000"."""

import threading

from bench.config import log

HOSTNAME = "bench-capacity"


class StandIn(threading.Thread):
    """Registered on `begin()`, beating until `stop()`; Database.capacity removes its rows.
    `workers` rows, each serving one of `pools` in turn, `slots` between them."""

    def __init__(self, url: str, slots: int, pools: list[str] | None = None, workers: int = 1) -> None:
        super().__init__(name="bench-stand-in", daemon=True)
        self.url, self.slots, self.pools, self.workers = url, slots, pools or ["default"], workers
        self.stopping = threading.Event()
        self.registered = threading.Event()

    def run(self) -> None:
        import psycopg
        from django.conf import settings

        conn = psycopg.connect(self.url, autocommit=True)
        conn.execute(
            "INSERT INTO pools_worker"
            " (hostname, pid, pids, pools, slots, busy, processed, rate, started_at, last_seen_at)"
            " SELECT %s, g, '[]', jsonb_build_array((%s::text[])[1 + g %% cardinality(%s::text[])]),"
            " greatest(%s / %s, 1), 0, 0, 0, now(), now() FROM generate_series(0, %s - 1) AS g",
            [HOSTNAME, self.pools, self.pools, self.slots, self.workers, self.workers],
        )
        self.registered.set()
        while not self.stopping.wait(settings.TICKWORK_WORKER_BEAT_SECONDS):
            try:
                if conn.closed:
                    conn = psycopg.connect(self.url, autocommit=True)
                conn.execute("UPDATE pools_worker SET last_seen_at = now() WHERE hostname = %s", [HOSTNAME])
            except psycopg.Error as error:  # as the real worker: try again at the next beat
                log(f"the stand-in fleet could not report: {error}")
                conn.close()
        conn.close()

    def begin(self) -> "StandIn":
        self.start()
        if not self.registered.wait(30):
            raise RuntimeError("the stand-in fleet could not register")
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
