"""The fairness stage: how admission shares a pool between tenants, with the real dispatcher and
workers of the end-to-end stages (noop jobs, one pool).

- The midnight herd: `herd` executions due at the same instant across `herd_tenants` tenants;
  every tenant's first start must come before any tenant's fifth.
- Weights: two tenants of weights 3 and 1 with equal backlogs; the first starts are shared 3:1.
- Equal weights: four tenants with equal backlogs; Jain's index over their first starts.
- A quiet tenant beside a noisy one: one job every 100 ms while another tenant's backlog is
  due; the quiet tenant's due → start lag, against the same feed with no backlog.

Each backlog becomes due at one instant (so that it is all there when admission starts choosing),
and what is left of it when the figure is taken is cancelled."""

import time
from datetime import UTC, datetime, timedelta

from bench.config import log
from bench.processes import wait_for
from bench.results import Figure, percentile


class Fairness:
    def __init__(self, bench) -> None:
        self.bench, self.db, self.cfg = bench, bench.db, bench.cfg

    def run(self) -> None:
        self.herd()
        self.weights()
        self.equal_shares()
        self.quiet_tenant()

    # -- the figures

    def herd(self) -> None:
        count, tenants = self.cfg.herd, self.cfg.herd_tenants
        log(f"fairness: the midnight herd, {count:,} due at once across {tenants} tenants")
        ids = self.tenants("bench-herd", tenants)
        at = self.backlog(ids, count // tenants)
        self.wait_for_starts(ids, at_least=5)
        first, fifth = self.db.conn.execute(
            "SELECT max(started_at) FILTER (WHERE n = 1), min(started_at) FILTER (WHERE n = 5)"
            " FROM (SELECT started_at, row_number() OVER (PARTITION BY tenant_id ORDER BY started_at) AS n"
            "       FROM executions_execution WHERE tenant_id = ANY(%s) AND started_at IS NOT NULL) AS s",
            [ids],
        ).fetchone()
        self.cancel(ids)
        last_first, first_fifth = ((t - at).total_seconds() * 1000 for t in (first, fifth))
        log(f"  every tenant's first start by {last_first:.0f} ms; the first fifth start at {first_fifth:.0f} ms")
        self.bench.figures.append(
            Figure(
                f"herd ({count:,} due at once, {tenants} tenants): last tenant's first start",
                "ms",
                last_first,
                first_fifth,
                "any tenant's fifth start",
                "before any fifth",
                last_first < first_fifth,
            )
        )

    def weights(self) -> None:
        per_tenant = self.cfg.fair_backlog
        log(f"fairness: weights 3 and 1, {per_tenant:,} due each")
        heavy, light = self.tenants("bench-weight-3", 1, weight=3) + self.tenants("bench-weight-1", 1)
        self.backlog([heavy, light], per_tenant)
        counts = self.first_starts([heavy, light], per_tenant // 2)
        self.cancel([heavy, light])
        share = counts.get(heavy, 0) / max(1, sum(counts.values()))
        log(f"  shares of the first {sum(counts.values())} starts: weight 3 {share:.1%}, weight 1 {1 - share:.1%}")
        ok = abs(share - 0.75) <= 0.10
        self.bench.figures.append(
            Figure("share of starts, weight 3 vs 1", "%", 100 * share, 75.0, "its weight's share", "75 % ± 10", ok)
        )

    def equal_shares(self) -> None:
        per_tenant = self.cfg.fair_backlog // 2
        log(f"fairness: four tenants of weight 1, {per_tenant:,} due each")
        ids = self.tenants("bench-equal", 4)
        self.backlog(ids, per_tenant)
        counts = self.first_starts(ids, per_tenant)
        self.cancel(ids)
        shares = [counts.get(t, 0) for t in ids]
        jain = sum(shares) ** 2 / (len(shares) * sum(x * x for x in shares)) if any(shares) else 0.0
        log(f"  first {sum(shares)} starts: {shares}; Jain's index {jain:.3f}")
        self.bench.figures.append(
            Figure("Jain's index, 4 equal tenants", "", jain, 1.0, "perfectly even", "≥ 0.95", jain >= 0.95)
        )

    def quiet_tenant(self) -> None:
        seconds = 4.0 if self.cfg.quick else 8.0
        log(f"fairness: a quiet tenant (a job every 100 ms for {seconds:.0f} s), alone and beside a backlog")
        alone = self.quiet_feed("bench-quiet-alone", seconds)
        noisy = self.tenants("bench-noisy", 1)
        self.backlog(noisy, self.cfg.noisy_backlog)
        beside = self.quiet_feed("bench-quiet-beside", seconds)
        waiting = self.db.scalar(
            "SELECT count(*) FROM executions_execution WHERE tenant_id = ANY(%s) AND state = 'PENDING'", [noisy]
        )
        self.cancel(noisy)
        log(
            f"  lag p50/p99 alone {percentile(alone, 50):.0f}/{percentile(alone, 99):.0f} ms, beside a backlog"
            f" {percentile(beside, 50):.0f}/{percentile(beside, 99):.0f} ms ({waiting:,} of it still due at the end)"
        )
        for q, limit in ((50, 100.0), (99, 500.0)):
            value = percentile(beside, q)
            self.bench.figures.append(
                Figure(
                    f"quiet tenant's lag p{q} beside a backlog",
                    "ms",
                    value,
                    percentile(alone, q),
                    "the same feed alone",
                    f"≤ {limit:.0f} ms",
                    value <= limit and waiting > 0,
                    {"count": len(beside), "backlog_left": waiting},
                )
            )

    # -- helpers

    def tenants(self, prefix: str, count: int, *, weight: int = 1) -> list[int]:
        ids = [self.db.tenant(f"{prefix}-{i}-{time.time_ns()}") for i in range(count)]
        if weight != 1:
            self.db.conn.execute("UPDATE tenants_tenant SET weight = %s WHERE id = ANY(%s)", [weight, ids])
        return ids

    def backlog(self, tenants: list[int], per_tenant: int, *, rate_limit: str | None = None) -> datetime:
        """`per_tenant` NORMAL noop jobs of each tenant, all due at one instant: made for later,
        then moved to now in one statement, so that admission sees the whole herd at once.
        `rate_limit`: the named limit their target names (the ratelimit stage's)."""
        later = datetime.now(UTC) + timedelta(days=1)
        for tenant in tenants:
            self.db.insert(tenant=tenant, count=per_tenant, start=later, span=0, priority=1, rate_limit=rate_limit)
        at = datetime.now(UTC)
        self.db.conn.execute(
            "UPDATE executions_execution SET scheduled_for = %s, available_at = %s"
            " WHERE tenant_id = ANY(%s) AND state = 'PENDING'",
            [at, at, tenants],
        )
        self.db.conn.execute("SELECT pg_notify('tickwork_due', %s)", [at.isoformat()])
        return at

    def wait_for_starts(self, tenants: list[int], *, at_least: int) -> None:
        def every_tenant_has() -> bool:
            started = self.db.scalar(
                "SELECT count(*) FROM (SELECT tenant_id FROM executions_execution"
                " WHERE tenant_id = ANY(%s) AND started_at IS NOT NULL GROUP BY tenant_id HAVING count(*) >= %s) s",
                [tenants, at_least],
            )
            return started == len(tenants)

        wait_for(every_tenant_has, timeout=300, what="the herd's starts", interval=0.25, procs=self.bench.procs)

    def first_starts(self, tenants: list[int], count: int) -> dict[int, int]:
        """Per tenant, how many of the first `count` starts among `tenants` were its."""

        def started() -> bool:
            n = self.db.scalar(
                "SELECT count(*) FROM executions_execution WHERE tenant_id = ANY(%s) AND started_at IS NOT NULL",
                [tenants],
            )
            return n >= count

        wait_for(started, timeout=300, what="the backlogs' starts", interval=0.1, procs=self.bench.procs)
        rows = self.db.conn.execute(
            "SELECT tenant_id, count(*) FROM (SELECT tenant_id FROM executions_execution"
            " WHERE tenant_id = ANY(%s) AND started_at IS NOT NULL ORDER BY started_at LIMIT %s) s GROUP BY tenant_id",
            [tenants, count],
        ).fetchall()
        return dict(rows)

    def cancel(self, tenants: list[int]) -> None:
        """The rest of a backlog, out of the way of the next figure (bench bookkeeping, not a
        transition: no event, no observer). The running dispatcher's claim moves rows of the same
        tenants in another order, so this may be the side PostgreSQL breaks a deadlock with: then
        it runs again."""
        import psycopg

        for attempt in range(5):
            try:
                self.db.conn.execute(
                    "UPDATE executions_execution SET state = 'CANCELLED', finished_at = now(), updated_at = now()"
                    " WHERE tenant_id = ANY(%s) AND state = 'PENDING'",
                    [tenants],
                )
                break
            except psycopg.errors.DeadlockDetected:
                if attempt == 4:
                    raise
        wait_for(
            lambda: (
                not self.db.scalar(
                    # ORs, not IN: each state's arm reads its own partial index (executions/models.py).
                    "SELECT count(*) FROM executions_execution"
                    " WHERE tenant_id = ANY(%s) AND (state = 'QUEUED' OR state = 'RUNNING')",
                    [tenants],
                )
            ),
            timeout=120,
            what="what was admitted to finish",
            interval=0.1,
            procs=self.bench.procs,
        )

    def quiet_feed(self, slug: str, seconds: float) -> list[float]:
        """A job every 100 ms, each due the moment it is made; the lags of their starts, in ms."""
        (tenant,) = self.tenants(slug, 1)
        sent = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            self.db.insert(tenant=tenant, count=1, start=datetime.now(UTC), span=0, notify=True, priority=1)
            sent += 1
            time.sleep(max(0.0, started + sent * 0.1 - time.perf_counter()))
        wait_for(lambda: self.db.all_succeeded(tenant, sent), timeout=120, what="the quiet tenant's jobs",
                 interval=0.05, procs=self.bench.procs)  # fmt: skip
        rows = self.db.conn.execute(
            "SELECT extract(epoch FROM started_at - scheduled_for) FROM executions_execution WHERE tenant_id = %s",
            [tenant],
        ).fetchall()
        return [float(r[0]) * 1000 for r in rows]
