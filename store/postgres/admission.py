"""The claim's reads and writes (scheduling/admission.py decides; these fetch and record).

`AdmissionStatements` is the embedded default's (SQLite: portable SQL, one writer at a time, a
loop where PostgreSQL would probe in one statement); `PostgresAdmissionStatements` runs each read
as index probes whose cost follows the number of tenants and of rows taken, never the backlog:
- a pool's due work in order: one probe per priority level of (pool, priority, available_at);
- which tenants have due work, and each one's earliest: a skip scan of (pool, priority, tenant_id,
  available_at) that visits only the tenants with PENDING work, one descent each;
- each chosen tenant's next executions, where the pool's walk did not already read them: one
  probe per tenant, LIMIT its share.
"""

from collections.abc import Mapping, Sequence
from datetime import datetime

from django.db import connection

from jobs.models import Priority
from pools.models import PoolClock
from store.admitted import AdmittedCounts
from store.postgres import queries
from store.rows import DueRow, due_row


class PostgresAdmission(AdmittedCounts):
    # Any constant: the claim locks' space (advisory locks of two keys: this, and the pool's name
    # hashed, or 0 for what spans pools), held until its transaction ends.
    CLAIM_LOCKS = 710_451_200
    # A worker's pools as rows (the snapshot's {pools_of}).
    POOLS_OF = "jsonb_array_elements_text(w.pools) AS j(value)"

    def pools_with_due(self, pools: Sequence[str], *, now: datetime) -> set[str]:
        if not pools:
            return set()
        return {pool for (pool,) in self.fetch(queries.POOLS_WITH_DUE, [list(pools), now])}

    def claim_pool(self, pool: str, *, seen: int, counts: tuple[int, int]) -> tuple[int, int] | None:
        # Tried, never waited for: a claim that finds a pool taken goes on to the next, so claims
        # of different pools never wait on each other. The lock across pools is the only one
        # waited for, and a claim that holds it never waits for a pool's: no cycle.
        # Two pools whose names hash alike share a lock, which costs only their side-by-side claims.
        # The same round trip makes the claim's commit asynchronous: it returns without waiting
        # for its WAL to reach disk. A claim is only ever redone, never lost: if the database
        # crashes before that WAL is flushed, the rows are PENDING again under their old token, so
        # the messages published for them start nothing (the token does not match, or a message
        # repeats one the next claim sends, which the start's guard absorbs), and the next claim
        # admits them and materialises their fires again. A worker's start commits synchronously,
        # which flushes the claim's WAL before anything runs. The wait was a few percent of a
        # claim (bench/README.md, "The store's shapes").
        rows = self.fetch(queries.CLAIM_POOL, [pool, self.CLAIM_LOCKS, pool])
        if not rows:
            return None
        ((stamp,),) = rows
        # Another claim of the pool committed after the snapshot: read again, in a statement of
        # its own, whose snapshot holds that claim (committed before its lock was let go). A
        # count per pool walks every admitted row; most claims need none (2,000 workers in 200
        # pools: bench stage dispatchers).
        return counts if stamp == seen + 1 else self.pool_admitted(pool)

    def hold_tenants(self, tenant_ids: Sequence[int]) -> dict[int, int]:
        self.fetch(queries.CLAIM_ACROSS_POOLS, [self.CLAIM_LOCKS])
        return self.tenants_admitted(tenant_ids)

    def due_in_pool(self, *, pool: str, now: datetime, limit: int) -> list[DueRow]:
        # One probe per level walks the partial index (pool, priority, available_at) and stops at
        # `limit`: a LOW row is looked at only when HIGH and NORMAL have fewer than that due.
        # No row locks: a pool's claims take turns under its lock, and the UPDATE that moves the
        # rows chosen is guarded by their state, so a row cancelled meanwhile is not moved.
        # Locking what a walk reads (up to the batch and one more) was much of a contended claim.
        rows = self.fetch(
            queries.DUE_IN_POOL,
            [pool, now, limit, limit],
        )
        return [due_row(row) for row in rows]

    def shares(self, *, pool: str) -> tuple[float, list[tuple[int, int, int | None, float]]]:
        # Only the tenants with PENDING work in the pool, at any level: the others have nothing
        # to be given a turn, and reading every tenant's row was a claim's cost per tenant.
        levels = [level for level, _ in Priority.choices]
        rows = self.fetch(
            queries.shares(levels),
            [*(value for level in levels for value in (pool, level, pool, level)), pool, pool],
        )
        clock = next((float(row[4]) for row in rows if row[4] is not None), None)
        if clock is None:
            clock = PoolClock.objects.filter(pool=pool).values_list("virtual_time", flat=True).first() or 0.0
        return clock, [(t, w, cap, float(tag)) for t, w, cap, tag, _ in rows]

    def due_heads(
        self, *, pool: str, priority: int, tenant_ids: Sequence[int], now: datetime
    ) -> list[tuple[int, datetime]]:
        if not tenant_ids:
            return []
        # Only the tenants that have PENDING work in the pool at this level are probed, by a skip
        # scan that lands on each one's earliest PENDING execution: its head, when its job is
        # active (else a probe of its due work finds the first of an active job). One descent of
        # the index per tenant, where a skip scan and then a probe were two: in a herd each walks
        # over the entries the claims before it left behind (dead until a vacuum).
        rows = self.fetch(
            queries.DUE_HEADS,
            [pool, priority, pool, priority, pool, priority, now, now, list(tenant_ids)],
        )
        return [(tenant_id, at) for tenant_id, at in rows if at is not None]

    def due_of_tenants(self, *, pool: str, priority: int, quotas: Mapping[int, int], now: datetime) -> list[DueRow]:
        if not quotas:
            return []
        rows = self.fetch(
            queries.DUE_OF_TENANTS,
            [list(quotas), list(quotas.values()), pool, priority, now],
        )
        return [due_row(row) for row in rows]

    def save_shares(self, *, pool: str, finish_tags: Mapping[int, float], virtual_time: float) -> None:
        # One statement from arrays: the ORM's upsert of a model per tenant cost the fair path
        # a statement per tenant (bench/README.md).
        with connection.cursor() as cursor:
            cursor.execute(
                queries.SAVE_SHARES,
                [pool, list(finish_tags), list(finish_tags.values()), pool, virtual_time],
            )
