"""The benchmark's databases: created, filled with `INSERT … SELECT generate_series`, read, dropped."""

from datetime import UTC, datetime

from bench.config import NOTIFY_CHANNEL

# --- The databases ----------------------------------------------------------------------------------

# Jobs, their first executions and those executions' first events, in one statement: a one-off
# `noop` job per execution, due at a random instant in [start, start + span). One priority in ten
# is HIGH and one in ten LOW, so the claim walks all three levels. (`+ g * interval '0'` makes
# the LATERAL depend on g, so random() is drawn per row.)
_JOBS_AND_EXECUTIONS = """
WITH j AS (
    INSERT INTO jobs_job (id, tenant_id, name, type, run_at, schedule, timezone, pool, handler, rate_limit,
        payload, max_attempts, backoff, initial_delay_ms, max_delay_ms, jitter, timeout_sec, priority, misfire_policy,
        concurrency_policy, state, next_fire_at, request_fingerprint, event_name, created_at, updated_at)
    SELECT gen_random_uuid(), %(tenant)s, 'bench ' || g, 'ONCE', t.at, '', 'UTC', 'default', 'noop',
        %(rate_limit)s, '{}',
        3, 'EXPONENTIAL', 1000, 60000, true, 3600,
        COALESCE(%(priority)s, CASE WHEN g %% 10 = 0 THEN 0 WHEN g %% 10 = 5 THEN 2 ELSE 1 END),
        'RUN_ONCE', 'ALLOW', 'ACTIVE', t.at, '', '', %(now)s, %(now)s
    FROM generate_series(1, %(count)s) AS g
    CROSS JOIN LATERAL (
        SELECT %(start)s::timestamptz + random() * %(span)s * interval '1 second' + g * interval '0' AS at
    ) AS t
    RETURNING id, tenant_id, priority, run_at
), e AS (
    INSERT INTO executions_execution (id, job_id, tenant_id, pool, priority, origin, attempt, state, scheduled_for,
        available_at, lease_token, publish_count, worker_id, error, traceback, step, created_at, updated_at,
        history_derived)
    SELECT gen_random_uuid(), j.id, j.tenant_id, 'default', j.priority, 'SCHEDULE', 1, 'PENDING', j.run_at,
        j.run_at, 0, 0, '', '', '', '', %(now)s, %(now)s, true
    FROM j
    RETURNING id
)"""
# Jobs and their first executions in one statement, as the application makes them (their history
# derived, so no event row: store/history.py): a one-off `noop` job per execution, due at a random
# instant in [start, start + span). One priority in ten is HIGH and one in ten LOW, so the claim
# walks all three levels. (`+ g * interval '0'` makes the LATERAL depend on g, so random() is
# drawn per row.)
INSERT_SQL = _JOBS_AND_EXECUTIONS + " SELECT count(*) FROM e"
# The same with the dispatchers' wake-up that scheduling.job_creation sends with each create, still one
# statement (so one round trip): the lag test's feeder makes 500 jobs a second on the same CPUs.
INSERT_AND_NOTIFY_SQL = f"{_JOBS_AND_EXECUTIONS} SELECT pg_notify(%(channel)s, %(start)s::text) FROM e"


class Database:
    """One of the benchmark's databases: created, filled and dropped here through plain psycopg
    (bulk SQL), beside Django's connection (the code under test)."""

    def __init__(self, admin_url: str, url: str, name: str) -> None:
        self.admin_url, self.url, self.name = admin_url, url, name
        self.conn = None
        self.fleet = None  # the stand-in worker while one is registered (capacity)

    def create(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{self.name}"')

    def connect(self) -> None:
        import psycopg

        self.conn = psycopg.connect(self.url, autocommit=True)

    def drop(self) -> None:
        import psycopg

        if self.fleet is not None:  # its row goes with the database
            self.fleet.stop()
            self.fleet = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def scalar(self, sql: str, params=None):
        return self.conn.execute(sql, params).fetchone()[0]

    def tenant(self, slug: str) -> int:
        return self.scalar(
            "INSERT INTO tenants_tenant (slug, name, weight, signing_secret, created_at)"
            " VALUES (%s, %s, 1, md5(random()::text), now()) RETURNING id",
            [slug, slug],
        )

    def insert(
        self,
        *,
        tenant: int,
        count: int,
        start: datetime,
        span: float,
        chunk: int = 50_000,
        notify: bool = False,
        priority: int | None = None,
        rate_limit: str | None = None,
    ) -> None:
        """`count` one-off noop jobs due in [start, start + span), committed together; `notify`
        wakes the dispatchers as scheduling.job_creation does. `priority`: all of that one (else
        one in ten HIGH and one in ten LOW). `rate_limit`: the limit their target names."""
        now = datetime.now(UTC)
        if count == 1 and notify:  # autocommit: one statement, one round trip
            params = {
                "tenant": tenant, "count": 1, "start": start, "span": span, "now": now, "priority": priority,
                "rate_limit": rate_limit,
            }  # fmt: skip
            self.conn.execute(INSERT_AND_NOTIFY_SQL, {**params, "channel": NOTIFY_CHANNEL})
            return
        with self.conn.transaction():
            for offset in range(0, count, chunk):
                params = {
                    "tenant": tenant,
                    "count": min(chunk, count - offset),
                    "start": start,
                    "span": span,
                    "priority": priority,
                    "rate_limit": rate_limit,
                }
                self.conn.execute(INSERT_SQL, {**params, "now": now})
            if notify:
                self.conn.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, start.isoformat()])

    def copy_tenant(self, source: "Database", tenant: int) -> None:
        """`source`'s jobs, executions and events of `tenant` (the same id here), copied row for
        row but for the events' serial ids."""
        events = "execution_id IN (SELECT id FROM executions_execution WHERE tenant_id = %s)"
        tables = (("jobs_job", "tenant_id = %s"), ("executions_execution", "tenant_id = %s"),
                  ("executions_executionevent", events))  # fmt: skip
        with self.conn.transaction():
            for table, where in tables:
                columns = ", ".join(
                    column
                    for (column,) in source.conn.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
                        " AND NOT (table_name = 'executions_executionevent' AND column_name = 'id')"
                        " ORDER BY ordinal_position",
                        [table],
                    )
                )
                query = f"COPY (SELECT {columns} FROM {table} WHERE {where}) TO STDOUT (FORMAT BINARY)"
                with (
                    source.conn.cursor().copy(query, [tenant]) as out,
                    self.conn.cursor().copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as into,
                ):
                    for data in out:
                        into.write(data)

    def define_rate_limit(self, name: str, per_second: float, burst: int) -> None:
        """The named rate limit `name` (pools.models.RateLimit), its clocks at zero."""
        self.conn.execute(
            "INSERT INTO pools_ratelimit (name, per_second, burst, admit_tat, start_tat, updated_at)"
            " VALUES (%s, %s, %s, 0, 0, now()) ON CONFLICT (name) DO UPDATE"
            " SET per_second = excluded.per_second, burst = excluded.burst, admit_tat = 0, start_tat = 0",
            [name, per_second, burst],
        )

    def capacity(self, slots: int, *, pools: list[str] | None = None, workers: int = 1) -> None:
        """A worker registered as live with `slots` slots and kept live (bench/fleet.py), for the
        stages that dispatch with no worker running (the statements, the dispatch round, the
        cron stage); 0 removes it."""
        from bench.fleet import HOSTNAME, StandIn

        if self.fleet is not None:
            self.fleet.stop()
            self.fleet = None
        self.conn.execute("DELETE FROM pools_worker WHERE hostname = %s", [HOSTNAME])
        if slots:
            self.fleet = StandIn(self.url, slots, pools, workers).begin()

    def cancel_due(self) -> None:
        """What is PENDING and due now, out of the way (bookkeeping, not a transition)."""
        self.conn.execute(
            "UPDATE executions_execution SET state = 'CANCELLED', finished_at = now(), updated_at = now()"
            " WHERE state = 'PENDING' AND available_at <= now()"
        )

    def vacuum(self) -> None:
        for table in ("jobs_job", "executions_execution", "executions_executionevent"):
            self.conn.execute(f"VACUUM (ANALYZE) {table}")

    def pending(self) -> int:
        return self.scalar("SELECT count(*) FROM executions_execution WHERE state = 'PENDING'")

    def all_succeeded(self, tenant: int, count: int) -> bool:
        """Whether the tenant's `count` jobs have all succeeded. Polled every 50 ms while the
        system under test runs, so it reads only the unfinished rows (a few index probes):
        counting the SUCCEEDED ones cost 22 ms a poll at 5,000 rows, CPU taken from the workers.
        ORs, not IN: each state's arm reads an index whose condition it implies (QUEUED and RUNNING
        rows are in their own partial indexes only: executions/models.py)."""
        unfinished = self.scalar(
            "SELECT count(*) FROM executions_execution"
            " WHERE tenant_id = %s AND (state = 'PENDING' OR state = 'QUEUED' OR state = 'RUNNING')",
            [tenant],
        )
        return (
            unfinished == 0
            and self.scalar(
                "SELECT count(*) FROM executions_execution WHERE tenant_id = %s AND state = 'SUCCEEDED'", [tenant]
            )
            >= count
        )
