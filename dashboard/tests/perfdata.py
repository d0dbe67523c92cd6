"""A synthetic history for performance tests: N executions of M jobs across tenants, inserted
with INSERT … SELECT generate_series (PostgreSQL), shaped like a busy install:

- 96% SUCCEEDED, 2% DEAD (three kinds of error, fingerprinted), 1% CANCELLED, and live work:
  0.5% PENDING (half of it due), 0.2% QUEUED, 0.1% RUNNING; one event per execution;
- the newest 20,000 runs fall in the last hour (the overview's charts read those), the rest
  spread back over about a month;
- every tenth job a CRON job, 10% of runs in pool "billing".

Used by dashboard/tests/test_performance.py.
"""

from datetime import datetime

from django.db import connection

from executions.fingerprints import fingerprint

# Executions per job are about total / jobs; ids are md5-derived so rows can name their job
# without a join.
_JOBS_SQL = """
INSERT INTO jobs_job (
    id, tenant_id, name, type, run_at, delay_sec, schedule, timezone, pool, handler, payload,
    max_attempts, backoff, initial_delay_ms, max_delay_ms, jitter, timeout_sec, priority,
    misfire_policy, concurrency_policy, state, next_fire_at, idempotency_key, request_fingerprint,
    event_name, created_at, updated_at)
SELECT
    md5('job' || j)::uuid,
    (%(tenants)s::bigint[])[1 + j %% cardinality(%(tenants)s::bigint[])],
    'job-' || j || CASE WHEN j %% 7 = 0 THEN '-nightly-export' ELSE '-sync' END,
    CASE WHEN j %% 10 = 0 THEN 'CRON' ELSE 'ONCE' END,
    CASE WHEN j %% 10 = 0 THEN NULL ELSE %(now)s - (j || ' seconds')::interval END,
    NULL,
    CASE WHEN j %% 10 = 0 THEN '*/5 * * * *' ELSE '' END,
    CASE WHEN j %% 20 = 0 THEN 'Europe/Paris' ELSE 'UTC' END,
    CASE WHEN j %% 10 = 3 THEN 'billing' ELSE 'default' END,
    CASE WHEN j %% 13 = 0 THEN 'fail' ELSE 'noop' END,
    '{"rows": 100}'::jsonb,
    3, 'EXPONENTIAL', 1000, 60000, true, 3600, 1, 'RUN_ONCE', 'ALLOW',
    CASE WHEN j %% 10 = 0 THEN 'ACTIVE' WHEN j %% 50 = 1 THEN 'PAUSED' ELSE 'ACTIVE' END,
    CASE WHEN j %% 10 = 0 THEN %(now)s + interval '5 minutes' ELSE NULL END,
    NULL, '', '',
    %(now)s - (j || ' minutes')::interval,
    %(now)s - (j || ' minutes')::interval
FROM generate_series(1, %(jobs)s) AS j
"""

_EXECUTIONS_SQL = """
INSERT INTO executions_execution (
    id, job_id, tenant_id, pool, priority, origin, attempt, state, scheduled_for, available_at,
    lease_token, lease_expires_at, timeout_at, republish_at, publish_count, queued_at, started_at,
    heartbeat_at, finished_at, cancel_requested_at, worker_id, result, error, traceback,
    checkpoint, step, created_at, updated_at, error_fingerprint)
SELECT
    md5('execution' || i)::uuid,
    md5('job' || (1 + i %% %(jobs)s))::uuid,
    (%(tenants)s::bigint[])[1 + (1 + i %% %(jobs)s) %% cardinality(%(tenants)s::bigint[])],
    CASE WHEN (1 + i %% %(jobs)s) %% 10 = 3 THEN 'billing' ELSE 'default' END,
    1, 'SCHEDULE',
    CASE WHEN s.state = 'DEAD' THEN 3 ELSE 1 END,
    s.state,
    t.at, t.at, 1,
    CASE WHEN s.state = 'RUNNING' THEN %(now)s + interval '30 seconds' END,
    CASE WHEN s.state = 'RUNNING' THEN %(now)s + interval '1 hour' END,
    CASE WHEN s.state = 'QUEUED' THEN %(now)s + interval '30 seconds' END,
    CASE WHEN s.state = 'PENDING' THEN 0 ELSE 1 END,
    CASE WHEN s.state <> 'PENDING' THEN t.at + interval '20 milliseconds' END,
    CASE WHEN s.state NOT IN ('PENDING', 'QUEUED') THEN t.at + t.lag END,
    CASE WHEN s.state = 'RUNNING' THEN %(now)s - interval '2 seconds'
         WHEN s.state NOT IN ('PENDING', 'QUEUED') THEN t.at + t.lag END,
    CASE WHEN s.state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') THEN t.at + t.lag + t.took END,
    CASE WHEN s.state = 'CANCELLED' THEN t.at + t.lag END,
    CASE WHEN s.state NOT IN ('PENDING', 'QUEUED') THEN 'worker-' || (i %% 8) || ':' || (1000 + i %% 8) ELSE '' END,
    CASE WHEN s.state = 'SUCCEEDED' THEN '{"ok": true}'::jsonb END,
    CASE WHEN s.state <> 'DEAD' THEN ''
         WHEN i %% 3 = 0 THEN 'HandlerFailure: upstream answered 503 for order ' || i
         WHEN i %% 3 = 1 THEN 'KeyError: ' || quote_literal('customer-' || i)
         ELSE 'TimeoutError: timed out after 30 s' END,
    CASE WHEN s.state = 'DEAD' THEN 'Traceback (most recent call last): ...' ELSE '' END,
    NULL, '',
    t.at, t.at,
    CASE WHEN s.state <> 'DEAD' THEN '' ELSE (%(dead_fingerprints)s::text[])[1 + i %% 3] END
FROM generate_series(1, %(executions)s) AS i
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN i %% 1000 < 960 THEN 'SUCCEEDED'
        WHEN i %% 1000 < 980 THEN 'DEAD'
        WHEN i %% 1000 < 990 THEN 'CANCELLED'
        WHEN i %% 1000 < 995 THEN 'PENDING'
        WHEN i %% 1000 < 997 THEN 'QUEUED'
        WHEN i %% 1000 < 998 THEN 'RUNNING'
        ELSE 'SUCCEEDED' END AS state
) AS s
CROSS JOIN LATERAL (
    SELECT
        CASE
            WHEN s.state = 'PENDING' AND i %% 2 = 0 THEN %(now)s + (i || ' milliseconds')::interval
            WHEN i <= 20000 THEN %(now)s - (i * 0.18 || ' seconds')::interval
            ELSE %(now)s - interval '1 hour' - ((i - 20000) * 2.6 || ' seconds')::interval
        END AS at,
        ((20 + i %% 480) || ' milliseconds')::interval AS lag,
        ((100 + i %% 1900) || ' milliseconds')::interval AS took
) AS t
"""

_EVENTS_SQL = """
INSERT INTO executions_executionevent (execution_id, at, from_state, to_state, attempt, worker_id, message)
SELECT id, coalesce(finished_at, started_at, queued_at, created_at),
       CASE WHEN state = 'PENDING' THEN '' ELSE 'RUNNING' END, state, attempt, worker_id,
       CASE WHEN state = 'DEAD' THEN 'attempts exhausted (3 of 3)' ELSE '' END
FROM executions_execution
"""


def insert_history(*, tenant_ids: list[int], now: datetime, jobs: int = 10_000, executions: int = 1_000_000) -> None:
    """Insert the synthetic jobs, executions and events, then VACUUM ANALYZE (as autovacuum
    would have by the time such a table exists), so plans and index-only scans are realistic.

    Loading a million rows into tables that keep a dozen indexes up to date row by row takes
    minutes; so, as a restore does, the secondary indexes are dropped, the rows loaded, and the
    indexes built again from their own definitions (the same indexes, built in one sorted pass).
    """
    params = {
        "tenants": tenant_ids,
        "now": now,
        "jobs": jobs,
        "executions": executions,
        # The DEAD rows' three kinds of error (as _EXECUTIONS_SQL writes them), fingerprinted.
        "dead_fingerprints": [
            fingerprint("HandlerFailure: upstream answered 503 for order 3"),
            fingerprint("KeyError: 'customer-1'"),
            fingerprint("TimeoutError: timed out after 30 s"),
        ],
    }
    tables = ["jobs_job", "executions_execution", "executions_executionevent"]
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
        cursor.execute("SET maintenance_work_mem = '256MB'")
        # The rows are consistent by construction; a superuser can skip the per-row foreign key
        # triggers (a third of the load time). Anyone else just loads a little slower.
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        superuser = cursor.fetchone()[0]
        if superuser:
            cursor.execute("SET session_replication_role = replica")
        cursor.execute(
            """
            SELECT i.indexname, i.indexdef FROM pg_indexes i
            WHERE i.schemaname = current_schema() AND i.tablename = ANY(%s)
              AND i.indexname NOT IN (SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))
            """,
            [tables],
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute(_JOBS_SQL, params)
        cursor.execute(_EXECUTIONS_SQL, params)
        cursor.execute(_EVENTS_SQL)
        for _, definition in indexes:
            cursor.execute(definition)
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("RESET synchronous_commit")
        if superuser:
            cursor.execute("RESET session_replication_role")
    vacuum()


def vacuum() -> None:
    with connection.cursor() as cursor:
        for table in ("jobs_job", "executions_execution", "executions_executionevent"):
            cursor.execute(f"VACUUM ANALYZE {table}")


_SAMPLES_SQL = """
INSERT INTO pools_poolsample (
    at, pool, tenant_id, due, queued, running, succeeded, failed, cancelled, started, lag_p50_ms, lag_p99_ms)
SELECT date_trunc('minute', %(now)s::timestamptz) - (m || ' minutes')::interval, p.pool, t.id,
       (m * 7 + coalesce(t.id, 0)) %% 300, (m + coalesce(t.id, 0)) %% 20, (m + coalesce(t.id, 0)) %% 8,
       20 + m %% 17, m %% 3, m %% 2, 24 + m %% 5, 40 + (m %% 50), 300 + (m * 13) %% 900
FROM generate_series(1, 8 * 24 * 60) AS m
CROSS JOIN (SELECT unnest(%(tenants)s::bigint[]) UNION ALL SELECT NULL) AS t(id)
CROSS JOIN (VALUES ('default'), ('billing')) AS p(pool)
"""

_WORKERS_SQL = """
INSERT INTO pools_worker (
    hostname, pid, pools, pids, slots, busy, processed, rate, started_at, last_seen_at, stopped_at)
SELECT 'worker-' || w, 1000 + w, '["default", "billing"]'::jsonb, jsonb_build_array(1000 + w), 8, w %% 8,
       1000 * w, 2.5, %(now)s - interval '3 hours',
       CASE WHEN w < 8 THEN %(now)s ELSE %(now)s - (w || ' minutes')::interval END,
       CASE WHEN w %% 3 = 0 AND w >= 8 THEN %(now)s - (w || ' minutes')::interval END
FROM generate_series(0, 199) AS w
"""


def insert_fleet(*, tenant_ids: list[int], now: datetime) -> None:
    """Eight days of the pools' minute samples for every (pool, tenant) and every pool's total:
    what the sweeper would have recorded, 138,240 rows for five tenants; and 200 registered workers, the first eight
    live and named as the executions' worker ids name them ("worker-N:100N"), the rest gone."""
    params = {"tenants": tenant_ids, "now": now}
    with connection.cursor() as cursor:
        cursor.execute(_SAMPLES_SQL, params)
        cursor.execute(_WORKERS_SQL, params)
        cursor.execute("VACUUM ANALYZE pools_poolsample")
        cursor.execute("VACUUM ANALYZE pools_worker")
