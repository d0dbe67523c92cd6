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

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection, models

from jobs.models import Priority
from pools.models import PoolClock, TenantShare
from store import tables

# A row of the claim: (execution id, whether its job recurs (CRON or INTERVAL: the claim makes its
# next fire), tenant id, priority).
DueRow = tuple[uuid.UUID, bool, int, int]


class Snapshot(NamedTuple):
    workers: list[tuple[list[str], int, int, float]]  # live: (pools, slots, busy, rate)
    admitted: list[tuple[str, int, str, int]]  # (pool, tenant id, QUEUED or RUNNING, count)
    limits: dict[int, int]  # tenant id: its concurrency limit, for those that have one
    paused: frozenset[str] = frozenset()  # pools an operator paused: nothing of them is admitted


# Whether the job fires by a schedule (jobs.models.RECURRING_TYPES).
_RECURS = "j.type IN ('CRON', 'INTERVAL')"
_ACTIVE_JOB = "JOIN jobs_job j ON j.id = e.job_id AND j.state = 'ACTIVE'"


class AdmissionStatements:
    def fetch(self, sql: str, params: Sequence[Any], *, read_as: Sequence[Any] = ()) -> list[tuple]:
        raise NotImplementedError  # the store's

    def anything_due(self, *, now: datetime) -> bool:
        """Whether any execution of an active job is due: a dispatcher's look at a quiet moment
        is this one probe of the due index, not the claim's statements."""
        # ORDER BY: a walk of the due index from its start. Without it the planner may take
        # LIMIT 1 as a reason to scan the whole table (16 ms at 100,000 rows, seen in EXPLAIN).
        rows = self.fetch(
            f"SELECT 1 FROM executions_execution e {_ACTIVE_JOB}"
            " WHERE e.state = 'PENDING' AND e.available_at <= %s ORDER BY e.available_at LIMIT 1",
            [now],
        )
        return bool(rows)

    def claim_lock(self) -> None:
        """Make concurrent claims take turns, until this transaction ends: a tenant's concurrency
        limit and a pool's capacity are counts over everything admitted, which two claims side by
        side would each read without the other's. SQLite has one writer at a time already."""

    def snapshot(self, *, live_since: datetime) -> "Snapshot":
        """What a claim starts from, in one round trip: the live workers (reported since
        `live_since` and not stopped, as pools.registry.live says), what is admitted per pool,
        tenant and state, the tenants' concurrency limits and the paused pools."""
        workers, admitted, limits, paused = [], [], {}, set()
        rows = self.fetch(
            "SELECT 'w', CAST(w.pools AS TEXT), w.slots, w.busy, CAST(w.rate AS REAL) FROM pools_worker w"
            " WHERE w.stopped_at IS NULL AND w.last_seen_at >= %s"
            " UNION ALL SELECT 'a', e.pool, e.tenant_id, COUNT(*), CAST(e.state = 'QUEUED' AS INTEGER)"
            " FROM executions_execution e WHERE e.state IN ('QUEUED', 'RUNNING') GROUP BY e.pool, e.tenant_id, e.state"
            " UNION ALL SELECT 'c', NULL, t.id, t.max_concurrent_executions, 0 FROM tenants_tenant t"
            " WHERE t.max_concurrent_executions IS NOT NULL"
            " UNION ALL SELECT 'p', p.pool, 0, 0, 0 FROM pools_poolpause p",
            [live_since],
        )
        for kind, text, a, b, c in rows:
            if kind == "w":
                workers.append((json.loads(text), a, b, float(c)))
            elif kind == "a":
                admitted.append((text, a, "QUEUED" if c else "RUNNING", b))
            elif kind == "p":
                paused.add(text)
            else:
                limits[a] = b
        return Snapshot(workers, admitted, limits, frozenset(paused))

    def due_in_pool(self, *, pool: str, now: datetime, limit: int) -> list[DueRow]:
        """Up to `limit` executions of active jobs due in `pool` by `now`: HIGH priority first,
        then by due time."""
        rows = self.fetch(
            f"SELECT e.id, {_RECURS}, e.tenant_id, e.priority FROM executions_execution e {_ACTIVE_JOB}"
            " WHERE e.state = 'PENDING' AND e.pool = %s AND e.available_at <= %s"
            " ORDER BY e.priority, e.available_at LIMIT %s",
            [pool, now, limit],
        )
        return [_due_row(row) for row in rows]

    def shares(self, *, pool: str) -> tuple[float, list[tuple[int, int, int | None, float]]]:
        """The pool's virtual time, and for every tenant (id, weight, concurrency limit, finish
        tag in this pool)."""
        clock = PoolClock.objects.filter(pool=pool).values_list("virtual_time", flat=True).first()
        rows = self.fetch(
            "SELECT t.id, t.weight, t.max_concurrent_executions, COALESCE(s.finish_tag, 0)"
            " FROM tenants_tenant t LEFT JOIN pools_tenantshare s ON s.tenant_id = t.id AND s.pool = %s",
            [pool],
        )
        return clock or 0.0, [(t, w, cap, float(tag)) for t, w, cap, tag in rows]

    def due_heads(
        self, *, pool: str, priority: int, tenant_ids: Sequence[int], now: datetime
    ) -> list[tuple[int, datetime]]:
        """(tenant id, earliest due time) for each of `tenant_ids` that has due work in `pool`
        at `priority`."""
        if not tenant_ids:
            return []
        rows = (
            tables.execution()
            ._default_manager.filter(
                state="PENDING",
                pool=pool,
                priority=priority,
                available_at__lte=now,
                tenant_id__in=tenant_ids,
                job__state="ACTIVE",
            )
            .values_list("tenant_id")
            .annotate(earliest=models.Min("available_at"))
            .order_by()
        )
        return list(rows)

    def due_of_tenants(self, *, pool: str, priority: int, quotas: Mapping[int, int], now: datetime) -> list[DueRow]:
        """For each tenant, up to its quota of its executions due in `pool` at `priority`, in
        due order."""
        rows = []
        for tenant_id, quota in quotas.items():
            rows += self.fetch(
                f"SELECT e.id, {_RECURS}, e.tenant_id, e.priority FROM executions_execution e {_ACTIVE_JOB}"
                " WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s AND e.tenant_id = %s"
                " AND e.available_at <= %s ORDER BY e.available_at LIMIT %s",
                [pool, priority, tenant_id, now, quota],
            )
        return [_due_row(row) for row in rows]

    def save_shares(self, *, pool: str, finish_tags: Mapping[int, float], virtual_time: float) -> None:
        """Write the tags the claim moved on."""
        if finish_tags:
            TenantShare.objects.bulk_create(
                [TenantShare(pool=pool, tenant_id=t, finish_tag=tag) for t, tag in finish_tags.items()],
                update_conflicts=True,
                unique_fields=["tenant", "pool"],
                update_fields=["finish_tag"],
            )
        PoolClock.objects.bulk_create(
            [PoolClock(pool=pool, virtual_time=virtual_time)],
            update_conflicts=True,
            unique_fields=["pool"],
            update_fields=["virtual_time"],
        )


def _present_cte(name: str) -> str:
    """A recursive CTE `name(id)`: the tenants that have PENDING work in a pool at a priority (its
    two pairs of parameters: pool, priority), found by a skip scan of the partial index (pool,
    priority, tenant_id, available_at) that jumps from one tenant to the next, one probe each.
    Probing every tenant instead cost a probe per tenant in the system at every contended claim:
    with 4,000 tenants, most with nothing pending, a claim took ~30 ms, and a 500/s feed's start
    lag went from 13 ms to over a second (bench, after the herds)."""
    present = (
        "SELECT e.tenant_id FROM executions_execution e WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s"
    )
    return (
        f"{name}(id) AS (({present} ORDER BY e.tenant_id LIMIT 1)"
        f" UNION ALL SELECT ({present} AND e.tenant_id > p.id ORDER BY e.tenant_id LIMIT 1)"
        f" FROM {name} p WHERE p.id IS NOT NULL)"
    )


class PostgresAdmissionStatements(AdmissionStatements):
    # Any constant: the claim's advisory lock, held until its transaction ends.
    CLAIM_LOCK = 7_104_512_001

    def claim_lock(self) -> None:
        # The same round trip makes the claim's commit asynchronous: it returns without waiting
        # for its WAL to reach disk. A claim is only ever redone, never lost: if the database
        # crashes before that WAL is flushed, the rows are PENDING again under their old token, so
        # the messages published for them start nothing (the token does not match, or a message
        # repeats one the next claim sends, which the start's guard absorbs), and the next claim
        # admits them and materialises their fires again. A worker's start commits synchronously,
        # which flushes the claim's WAL before anything runs. The wait was 2-6 ms of a claim of
        # 1,000 that takes about 65 (the benchmark's dispatch stage, A/B).
        self.fetch("SELECT pg_advisory_xact_lock(%s), set_config('synchronous_commit', 'off', true)", [self.CLAIM_LOCK])

    def due_in_pool(self, *, pool: str, now: datetime, limit: int) -> list[DueRow]:
        # One probe per level walks the partial index (pool, priority, available_at) and stops at
        # `limit`: a LOW row is looked at only when HIGH and NORMAL have fewer than that due.
        # No row locks: claims take turns under the claim lock, and the UPDATE that moves the
        # rows chosen is guarded by their state, so a row cancelled meanwhile is not moved.
        # Locking what a walk reads (up to the batch and one more) was half a contended claim.
        rows = self.fetch(
            "SELECT due.id, due.cron, due.tenant_id, due.priority"
            " FROM (VALUES (0), (1), (2)) AS level(priority) CROSS JOIN LATERAL ("
            f"  SELECT e.id, {_RECURS} AS cron, e.tenant_id, e.priority FROM executions_execution e {_ACTIVE_JOB}"
            "  WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = level.priority AND e.available_at <= %s"
            "  ORDER BY e.available_at LIMIT %s"
            ") AS due LIMIT %s",
            [pool, now, limit, limit],
        )
        return [_due_row(row) for row in rows]

    def shares(self, *, pool: str) -> tuple[float, list[tuple[int, int, int | None, float]]]:
        # Only the tenants with PENDING work in the pool, at any level: the others have nothing
        # to be given a turn, and reading every tenant's row was a claim's cost per tenant.
        levels = [level for level, _ in Priority.choices]
        ctes = ", ".join(_present_cte(f"present{level}") for level in levels)
        rows = self.fetch(
            f"WITH RECURSIVE {ctes}"
            " SELECT t.id, t.weight, t.max_concurrent_executions, COALESCE(s.finish_tag, 0), c.virtual_time"
            " FROM tenants_tenant t LEFT JOIN pools_tenantshare s ON s.tenant_id = t.id AND s.pool = %s"
            " LEFT JOIN pools_poolclock c ON c.pool = %s"
            f" WHERE t.id IN ({' UNION '.join(f'SELECT id FROM present{level}' for level in levels)})",
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
        first = (
            "SELECT e.tenant_id, e.available_at, e.job_id FROM executions_execution e"
            " WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s"
        )
        rows = self.fetch(
            f"WITH RECURSIVE present(id, at, job_id) AS (({first} ORDER BY e.tenant_id, e.available_at LIMIT 1)"
            " UNION ALL SELECT n.* FROM present p CROSS JOIN LATERAL"
            f" ({first} AND e.tenant_id > p.id ORDER BY e.tenant_id, e.available_at LIMIT 1) AS n)"
            " SELECT p.id, CASE WHEN j.state = 'ACTIVE' THEN p.at ELSE ("
            f"  SELECT e.available_at FROM executions_execution e {_ACTIVE_JOB}"
            "  WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s AND e.tenant_id = p.id"
            "  AND e.available_at <= %s ORDER BY e.available_at LIMIT 1"
            ") END FROM present p JOIN jobs_job j ON j.id = p.job_id"
            " WHERE p.at <= %s AND p.id = ANY(%s::bigint[])",
            [pool, priority, pool, priority, pool, priority, now, now, list(tenant_ids)],
        )
        return [(tenant_id, at) for tenant_id, at in rows if at is not None]

    def due_of_tenants(self, *, pool: str, priority: int, quotas: Mapping[int, int], now: datetime) -> list[DueRow]:
        if not quotas:
            return []
        rows = self.fetch(
            "SELECT due.id, due.cron, due.tenant_id, due.priority"
            " FROM unnest(%s::bigint[], %s::integer[]) AS q(tenant_id, quota) CROSS JOIN LATERAL ("
            f"  SELECT e.id, {_RECURS} AS cron, e.tenant_id, e.priority FROM executions_execution e {_ACTIVE_JOB}"
            "  WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s AND e.tenant_id = q.tenant_id"
            "  AND e.available_at <= %s ORDER BY e.available_at LIMIT q.quota"
            ") AS due",
            [list(quotas), list(quotas.values()), pool, priority, now],
        )
        return [_due_row(row) for row in rows]

    def save_shares(self, *, pool: str, finish_tags: Mapping[int, float], virtual_time: float) -> None:
        # One statement from arrays: the ORM's upsert of a model per tenant was half the fair
        # path's time at 500 tenants (65 ms a claim, profiled).
        with connection.cursor() as cursor:
            cursor.execute(
                "WITH shares AS (INSERT INTO pools_tenantshare (pool, tenant_id, finish_tag)"
                " SELECT %s, v.tenant_id, v.tag FROM unnest(%s::bigint[], %s::float8[]) AS v(tenant_id, tag)"
                " ON CONFLICT (tenant_id, pool) DO UPDATE SET finish_tag = EXCLUDED.finish_tag)"
                " INSERT INTO pools_poolclock (pool, virtual_time) VALUES (%s, %s)"
                " ON CONFLICT (pool) DO UPDATE SET virtual_time = EXCLUDED.virtual_time",
                [pool, list(finish_tags), list(finish_tags.values()), pool, virtual_time],
            )


def _due_row(row: tuple[Any, ...]) -> DueRow:
    execution_id, cron, tenant_id, priority = row
    return (
        execution_id if isinstance(execution_id, uuid.UUID) else uuid.UUID(execution_id),
        bool(cron),
        tenant_id,
        priority,
    )
