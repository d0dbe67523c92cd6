"""The retention stage: at a constant daily volume, with the sweeper's pruning running, the tables
hold steady instead of growing by the day.

Simulated days, time injected: each day `retention_volume` one-off jobs that ran and finished that
day are written (the job's row ACTIVE, which reads COMPLETED once its execution is SUCCEEDED, and
its four events, as a run leaves them), then the sweeper's pruning runs as `maintenance.sweeper`
runs it (`prune_many`, then `jobs_prune`, 500 at a time, again at once while a batch was full, then
the history's partitions past the retention dropped; each day's made before it is written)
with `now` at the day's end and a retention of RETENTION_DAYS, then a plain VACUUM (what
autovacuum does between two days of such churn) and the tables' sizes are read. After the
retention has passed, each day deletes what one day adds: the size on the last day must be within
10 % of the size on the first day after the retention. The pruning's rate is reported beside the
rate a million executions a day needs (11.6/s)."""

import time
from datetime import UTC, datetime, timedelta

from bench.config import log
from bench.history_retention import HistoryRetention
from bench.results import Figure

RETENTION_DAYS = 3
DAYS = RETENTION_DAYS + 4
TABLES = ("executions_execution", "executions_executionevent", "jobs_job")

# A day's finished one-off jobs, each with its execution and four events, in one statement.
_FINISHED_SQL = """
WITH j AS (
    INSERT INTO jobs_job (id, tenant_id, name, type, run_at, schedule, timezone, pool, handler, payload,
        max_attempts, backoff, initial_delay_ms, max_delay_ms, jitter, timeout_sec, priority, misfire_policy,
        concurrency_policy, state, next_fire_at, request_fingerprint, event_name, created_at, updated_at)
    SELECT gen_random_uuid(), %(tenant)s, 'bench retention ' || g, 'ONCE', t.at, '', 'UTC', 'default', 'noop', '{}',
        3, 'EXPONENTIAL', 1000, 60000, true, 3600, 1, 'RUN_ONCE', 'ALLOW', 'ACTIVE', t.at, '', '', t.at, t.at
    FROM generate_series(1, %(count)s) AS g
    CROSS JOIN LATERAL (SELECT %(day)s::timestamptz + (g::float / %(count)s) * interval '1 day' AS at) AS t
    RETURNING id, tenant_id, run_at
), e AS (
    INSERT INTO executions_execution (id, job_id, tenant_id, pool, priority, origin, attempt, state, scheduled_for,
        available_at, lease_token, publish_count, worker_id, error, traceback, step, result, queued_at, started_at,
        finished_at, created_at, updated_at)
    SELECT gen_random_uuid(), j.id, j.tenant_id, 'default', 1, 'SCHEDULE', 1, 'SUCCEEDED', j.run_at, j.run_at, 1, 1,
        'bench:1', '', '', '', '{"ok": true}', j.run_at, j.run_at, j.run_at + interval '5 ms', j.run_at, j.run_at
    FROM j
    RETURNING id, finished_at
)
INSERT INTO executions_executionevent (execution_id, at, from_state, to_state, attempt, worker_id, message)
SELECT e.id, e.finished_at, s.from_state, s.to_state, 1, 'bench:1', ''
FROM e CROSS JOIN (VALUES ('', 'PENDING'), ('PENDING', 'QUEUED'), ('QUEUED', 'RUNNING'), ('RUNNING', 'SUCCEEDED'))
    AS s(from_state, to_state)"""


class Retention:
    def __init__(self, bench) -> None:
        self.bench, self.db, self.cfg = bench, bench.db, bench.cfg

    def run(self) -> None:
        from django.db import transaction

        from executions import transitions
        from executions.history_partitions import history_partitions_ahead, history_partitions_drop
        from scheduling.pruning import jobs_prune

        volume = self.cfg.retention_volume
        log(f"retention: {DAYS} days of {volume:,} finished jobs a day, kept {RETENTION_DAYS} days")
        tenant = self.db.tenant("bench-retention")
        start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=DAYS + 40)
        sizes, pruned, prune_seconds = [], 0, 0.0
        for day in range(DAYS):
            at = start + timedelta(days=day)
            history_partitions_ahead(now=at, days=0)  # as the sweeper makes it ahead of the day
            for offset in range(0, volume, 50_000):
                count = min(50_000, volume - offset)
                part = at + timedelta(days=offset / volume)
                self.db.conn.execute(_FINISHED_SQL, {"tenant": tenant, "count": count, "day": part})
            before = at + timedelta(days=1) - timedelta(days=RETENTION_DAYS)
            began = time.perf_counter()
            while True:
                with transaction.atomic():  # as maintenance.services.retention holds them
                    executions, their_jobs = transitions.prune_many(before=before, limit=500)
                    jobs = jobs_prune(before=before, limit=500, pruned_jobs=their_jobs)
                pruned += executions
                if executions < 500 and jobs < 500:
                    break
            history_partitions_drop(before=before, limit=500)  # as retention does once caught up
            prune_seconds += time.perf_counter() - began
            for table in TABLES:
                self.db.conn.execute(f"VACUUM {table}")
            # A partitioned table's size is its partitions' (the history's, on PostgreSQL).
            size = sum(
                int(
                    self.db.scalar(
                        "SELECT COALESCE((SELECT sum(pg_total_relation_size(relid))"
                        " FROM pg_partition_tree(%s::regclass)), pg_total_relation_size(%s::regclass))",
                        [table, table],
                    )
                )
                for table in TABLES
            )
            rows = self.db.scalar("SELECT count(*) FROM executions_execution WHERE tenant_id = %s", [tenant])
            jobs_left = self.db.scalar("SELECT count(*) FROM jobs_job WHERE tenant_id = %s", [tenant])
            sizes.append(size)
            log(f"  day {day + 1}: {rows:,} executions, {jobs_left:,} jobs, {size / 2**20:,.0f} MiB")
        rate = pruned / prune_seconds if prune_seconds else float("inf")
        settled, last = sizes[RETENTION_DAYS], sizes[-1]
        log(f"  pruned {pruned:,} executions at {rate:,.0f}/s; size {settled / 2**20:,.0f} → {last / 2**20:,.0f} MiB")
        self.bench.figures.append(
            Figure(
                f"tables' size after {DAYS} days of {volume:,}/day, kept {RETENTION_DAYS}",
                " MiB",
                round(last / 2**20),
                round(settled / 2**20),
                f"on day {RETENTION_DAYS + 1}",
                "≤ 1.1x baseline",
                last <= 1.1 * settled,
            )
        )
        HistoryRetention(self.bench).run()
        self.bench.figures.append(
            Figure(
                "pruning (executions with their events and jobs)",
                "/s",
                rate,
                1_000_000 / 86_400,
                "a million a day",
                "≥ 10x baseline",
                rate >= 10 * 1_000_000 / 86_400,
            )
        )
