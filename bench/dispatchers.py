"""Stage `dispatchers` (issue 37): do more dispatchers claim faster, and does the claim hold its cost
at a large fleet?

- *Dispatchers side by side*: `--dispatchers-backlog` one-offs fall due at one instant, spread over
  8 pools, with a stand-in fleet that has room for them all (bench/fleet.py); 1, 2 and 4
  `run_dispatcher` processes claim them. Throughput: executions claimed (on the broker) per second,
  from the instant they fell due to the last claimed. Time spent waiting for locks: the dispatchers'
  connections sampled in `pg_stat_activity` every 5 ms, those waiting on a lock counted (a pool's
  claim lock is tried, never waited for; the lock across pools is waited for, but nothing here is
  capped or rate-limited, so this is what is left: row and relation locks).
- *The claim at scale*: the same backlog claimed in process (`dispatcher.run_once`, as the dispatch
  stage does) with 10 workers in 1 pool and 10 tenants, then with 2,000 workers in 200 pools and
  10,000 tenants: the claim's time per execution claimed, the second against the first (at most 1.3 times).
"""

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from bench.config import log
from bench.results import Figure

POOLS = [f"bench-p{i}" for i in range(8)]
COUNTS = (1, 2, 4)
APP = "bench-dispatchers"


class Dispatchers:
    def __init__(self, bench) -> None:
        self.bench, self.cfg, self.db = bench, bench.cfg, bench.db

    def run(self) -> None:
        rates, waits = {}, {}
        for count in COUNTS:
            rates[count], waits[count] = [], []
            for _ in range(self.cfg.rounds):
                rate, waited = self.side_by_side(count)
                rates[count].append(rate)
                waits[count].append(waited)
                log(f"  {count} dispatcher(s): {rate:,.0f} claimed/s, {waited * 1000:.0f} ms waiting for locks")
        one = statistics.median(rates[1])
        for count in COUNTS[1:]:
            value = statistics.median(rates[count])
            self.bench.figures.append(
                Figure(
                    f"dispatchers: {count} claiming {self.cfg.dispatchers_backlog:,} due over {len(POOLS)} pools",
                    "/s",
                    value,
                    one,
                    "1 dispatcher",
                    "> 1 dispatcher",
                    value > one,
                    {"ours": rates[count], "baseline": rates[1], "lock_wait_s": waits[count]},
                )
            )
        self.bench.info["dispatchers"] = {"rates": rates, "lock_wait_s": waits}
        small, large = self.at_scale()
        self.bench.figures.append(
            Figure(
                "claim per execution, 2,000 workers in 200 pools, 10,000 tenants",
                " ms",
                large,
                small,
                "10 workers in 1 pool, 10 tenants",
                "≤ 1.3x",
                large <= 1.3 * small,
            )
        )

    # -- dispatchers side by side

    def side_by_side(self, count: int) -> tuple[float, float]:
        backlog = self.cfg.dispatchers_backlog
        tenant = self.db.tenant(f"bench-dispatchers-{count}-{time.monotonic_ns()}")
        self._backlog(tenant, backlog, POOLS)
        self.db.capacity(backlog, pools=POOLS, workers=len(POOLS))
        self.db.vacuum()
        url = f"{self.bench.env['DATABASE_URL']}?application_name={APP}"
        for k in range(count):
            self.bench.procs.start(
                f"bench-dispatcher-{count}-{k}", [sys.executable, "manage.py", "run_dispatcher"], {"DATABASE_URL": url}
            )
        self._wait_for_dispatchers(count)
        self.db.conn.execute(
            "UPDATE executions_execution SET available_at = now(), scheduled_for = now()"
            " WHERE tenant_id = %s AND state = 'PENDING'",
            [tenant],
        )
        self.db.conn.execute("SELECT pg_notify('tickwork_due', %s)", [datetime.now(UTC).isoformat()])
        began, waited, seen = time.perf_counter(), 0.0, time.perf_counter()
        while True:
            # Two probes, each an index's first entry: cheap beside the claims they watch.
            ((left, waiting),) = self.db.conn.execute(
                "SELECT EXISTS (SELECT 1 FROM executions_execution WHERE state = 'PENDING' AND pool = ANY(%s)"
                " AND available_at <= now()),"
                " (SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock')",
                [POOLS, APP],
            ).fetchall()
            now = time.perf_counter()
            waited += waiting * (now - seen)
            seen = now
            if not left:
                break
            if now - began > 300:
                raise RuntimeError(f"dispatchers: {backlog:,} not claimed in 300 s")
            time.sleep(0.005)
        elapsed = time.perf_counter() - began
        queued = self.db.scalar(
            "SELECT count(*) FROM executions_execution WHERE tenant_id = %s AND state = 'QUEUED' AND lease_token = 1",
            [tenant],
        )
        if queued != backlog:
            raise RuntimeError(f"dispatchers: {queued:,} of {backlog:,} claimed once")
        self.bench.procs.stop("bench-dispatcher-")
        self.db.capacity(0)
        self._retire([tenant], POOLS)
        return backlog / elapsed, waited

    def _wait_for_dispatchers(self, count: int) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.bench.procs.check_alive()
            live = self.db.scalar("SELECT count(DISTINCT pid) FROM pg_stat_activity WHERE application_name = %s", [APP])
            if live >= count:  # each has its LISTEN connection open: it is in its loop
                return
            time.sleep(0.1)
        raise RuntimeError(f"{count} dispatchers did not start within 60 s")

    # -- the claim at scale

    def at_scale(self) -> tuple[float, float]:
        backlog = self.cfg.dispatchers_backlog
        small = self._claim_cost(workers=10, pools=1, tenants=10, backlog=backlog)
        large = self._claim_cost(workers=2_000, pools=200, tenants=10_000, backlog=backlog)
        log(f"  claim per execution: {small:.4f} ms (10 workers, 10 tenants), {large:.4f} ms (2,000, 10,000)")
        return small, large

    def _claim_cost(self, *, workers: int, pools: int, tenants: int, backlog: int) -> float:
        from background.publisher import CeleryPublisher
        from dispatcher import dispatcher

        names = [f"bench-s{i}" for i in range(pools)]
        ids = [
            row[0]
            for row in self.db.conn.execute(
                "INSERT INTO tenants_tenant (slug, name, weight, signing_secret, created_at)"
                " SELECT s, s, 1, md5(random()::text), now()"
                " FROM (SELECT %s || '-' || g AS s FROM generate_series(1, %s) AS g) AS slugs RETURNING id",
                [f"bench-scale-{time.monotonic_ns()}", tenants],
            ).fetchall()
        ]
        self._backlog(ids[0], backlog, names, tenants=ids, due=datetime.now(UTC) - timedelta(seconds=1))
        self.db.capacity(backlog, pools=names, workers=workers)
        self.db.vacuum()
        publisher, claimed, elapsed = CeleryPublisher(), 0, 0.0
        now = datetime.now(UTC)
        while True:
            began = time.perf_counter()
            result = dispatcher.run_once(now=now, publisher=publisher, limit=self.bench.batch)
            elapsed += time.perf_counter() - began
            if not result.claimed:
                break
            claimed += result.claimed
        self.db.capacity(0)
        self._retire(ids, names)
        if claimed != backlog:
            raise RuntimeError(f"the claim at scale took {claimed:,} of {backlog:,}")
        return elapsed * 1000 / claimed

    # -- rows

    def _backlog(self, tenant: int, count: int, pools: list[str], *, tenants=None, due=None) -> None:
        """`count` one-offs of `tenant` due in a day (or at `due`), spread over `pools` (and over
        `tenants`, when given) by their ids."""
        start = due or datetime.now(UTC) + timedelta(days=1)
        self.db.insert(tenant=tenant, count=count, start=start, span=0, priority=1)
        self.db.conn.execute(
            "UPDATE executions_execution"
            " SET pool = (%s::text[])[1 + abs(hashtext(id::text)) %% cardinality(%s::text[])],"
            " tenant_id = COALESCE((%s::bigint[])[1 + abs(hashtext(id::text || 't'))"
            " %% NULLIF(cardinality(%s::bigint[]), 0)], tenant_id)"
            " WHERE tenant_id = %s AND state = 'PENDING'",
            [pools, pools, tenants or [], tenants or [], tenant],
        )

    def _retire(self, tenant_ids: list[int], pools: list[str]) -> None:
        """Out of the way of the next figures: the tenants' work done, their pools' queues emptied."""
        for pool in pools:
            self.bench.purge(f"tickwork.{pool}")
        self.db.conn.execute(
            "UPDATE executions_execution SET state = 'CANCELLED', republish_at = NULL, finished_at = now()"
            " WHERE tenant_id = ANY(%s) AND state IN ('PENDING', 'QUEUED')",
            [tenant_ids],
        )
