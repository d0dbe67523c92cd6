"""The ratelimit stage: a backlog over a named rate limit (pools/rate_limits.py), run by the real
dispatcher and workers of the end-to-end stages, its starts read from `started_at`.

A limit of 20/s with a burst of 1, and 10,002 due noop executions across three tenants of equal
weight (3,334 each), all naming it (their target's `rateLimit`): far more than the limit lets through while the
stage runs. The claim paces admission and gives the rest their turns in its fair order; the
worker's start counts each start against the limit in its own transaction. Figures:

- the start rate over a steady window (the first and last seconds dropped): the limit, ± 5 %;
- the most starts in any second [t, t + 1 s) of the stage, its first seconds included: at most
  per_second + burst - 1 (GCRA lets `burst` start at once, then one every 1 / per_second);
- each tenant's share of the window's starts: a third, ± 5 points;
- for reference, the longest gap between two starts of the stage, beside 1 / per_second.

What is left of the backlog is then cancelled and the limit removed."""

import itertools
import statistics
import time
from collections import Counter

from bench.config import log
from bench.fairness import Fairness
from bench.processes import wait_for
from bench.results import Figure

NAME, PER_SECOND, BURST = "bench-ratelimit", 20.0, 1
BACKLOG, TENANTS = 10_000, 3
SECOND = 1_000_000  # started_at is read in microseconds since the epoch: no rounding at the edges


class RateLimits:
    def __init__(self, bench) -> None:
        self.bench, self.db, self.cfg = bench, bench.db, bench.cfg

    def run(self) -> None:
        from pools.rate_limits import DEFINITIONS_TTL_SECONDS

        # The window is read after `edge` seconds (the first claims, turns handed out) and ends
        # `edge` seconds before the rows are read (starts still committing).
        edge, window = (4.0, 20.0) if self.cfg.quick else (5.0, 30.0)
        fairness = Fairness(self.bench)
        log(
            f"rate limit: {PER_SECOND:g}/s burst {BURST}, {BACKLOG:,} due across {TENANTS} tenants;"
            f" starts over {window:.0f} s after the first {edge:.0f} s"
        )
        self.db.define_rate_limit(NAME, PER_SECOND, BURST)
        # Each process reads the limits again only DEFINITIONS_TTL_SECONDS after it last did: until
        # then the dispatcher and the workers, which read none in the stages before, are unlimited.
        time.sleep(DEFINITIONS_TTL_SECONDS + 1)
        tenants = fairness.tenants("bench-ratelimit", TENANTS)
        due_at = fairness.backlog(tenants, -(-BACKLOG // TENANTS), rate_limit=NAME).timestamp()
        ends = due_at + 2 * edge + window
        wait_for(lambda: time.time() >= ends, timeout=ends - time.time() + 30, what="the rate-limited window",
                 interval=0.5, procs=self.bench.procs)  # fmt: skip
        starts = self.db.conn.execute(
            "SELECT tenant_id, (extract(epoch FROM started_at) * 1000000)::bigint FROM executions_execution"
            " WHERE tenant_id = ANY(%s) AND started_at IS NOT NULL ORDER BY started_at",
            [tenants],
        ).fetchall()
        clocks = self.db.conn.execute(
            "SELECT admit_tat - extract(epoch FROM now())::float8, start_tat - extract(epoch FROM now())::float8"
            " FROM pools_ratelimit WHERE name = %s",
            [NAME],
        ).fetchone()
        fairness.cancel(tenants)
        self.db.conn.execute("DELETE FROM pools_ratelimit WHERE name = %s", [NAME])
        self.figures(starts, tenants, int(due_at * SECOND), int(edge * SECOND), int(window * SECOND), clocks)

    def figures(
        self, starts: list[tuple[int, int]], tenants: list[int], due: int, edge: int, window: int, clocks
    ) -> None:
        opens = due + edge
        times = [at for _, at in starts]
        steady = [(tenant, at) for tenant, at in starts if opens <= at < opens + window]
        rate = len(steady) * SECOND / window
        busiest = _busiest_second(times)
        shares = [sum(1 for t, _ in steady if t == tenant) / max(1, len(steady)) for tenant in tenants]
        gaps = [(b - a) / 1000 for (_, a), (_, b) in itertools.pairwise(steady)]
        all_gaps = [(b - a) / 1000 for a, b in itertools.pairwise(times)]
        seconds = Counter((at - due) // SECOND for at in times)
        info = {
            # Each second's starts from the backlog's due instant: how the stage ramped.
            "per_second_from_due": [seconds[n] for n in range(max(seconds, default=-1) + 1)],
            "started": len(times),
            "in_window": len(steady),
            "per_second": round(rate, 3),
            "busiest_second": busiest,
            "tenant_shares": [round(s, 4) for s in shares],
            "gap_ms": {"min": min(gaps, default=0), "median": statistics.median(gaps) if gaps else 0,
                       "max": max(gaps, default=0)},
            # How far ahead of now each clock was when the rows were read: the claim's (turns
            # handed out) and the starts'.
            "clocks_ahead_s": [round(c, 3) for c in clocks] if clocks else None,
        }  # fmt: skip
        self.bench.info["ratelimit"] = info
        log(
            f"  {len(steady)} starts in the window: {rate:.2f}/s; {len(times)} in all, at most {busiest} in a"
            f" second; tenants' shares {', '.join(f'{s:.1%}' for s in shares)}; gaps between starts (ms)"
            f" {info['gap_ms']}; clocks ahead of now (claim, starts) {info['clocks_ahead_s']} s;"
            f" each second's starts {info['per_second_from_due']}"
        )
        most = PER_SECOND + BURST - 1
        self.bench.figures += [
            Figure(
                f"rate-limited starts ({PER_SECOND:g}/s, burst {BURST}; {BACKLOG:,} due, {TENANTS} tenants)",
                "/s", rate, PER_SECOND, "the limit", "± 5 %", abs(rate - PER_SECOND) <= 0.05 * PER_SECOND, info,
            ),
            Figure(
                "rate-limited starts in the busiest second", "", busiest, most, "per second + burst - 1",
                f"≤ {most:g}", busiest <= most,
            ),
            # For reference: the longest wait between two starts (a backlog over its limit ought to
            # start one every 1 / per_second from its first claim on).
            Figure(
                "rate-limited starts: the longest gap between two", "ms", max(all_gaps, default=0.0),
                1000 / PER_SECOND, "1 / per second", "reference", True,
            ),
            Figure(
                "rate-limited starts: the smallest tenant's share", "%", round(100 * min(shares), 1),
                round(100 / TENANTS, 1), "an equal share", "each 33 % ± 5",
                all(abs(s - 1 / TENANTS) <= 0.05 for s in shares),
            ),
        ]  # fmt: skip


def _busiest_second(times: list[int]) -> int:
    """The most of `times` (sorted, in microseconds) in any [t, t + 1 s)."""
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= SECOND:
            first += 1
        most = max(most, last - first + 1)
    return most
