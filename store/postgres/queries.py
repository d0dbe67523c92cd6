"""PostgreSQL's own named queries; those both stores run are in store/queries.py. `{name}` slots
are filled in by the store with its own fragments (never a caller's text); `%s` are parameters.
Why each is shaped as it is, and what it saved, is in bench/README.md ("The store's shapes")."""

from datetime import datetime

from store.history import CREATED_BY, ROOT_STEP_MESSAGE, SCHEDULED_MESSAGE, STARTED_MESSAGE
from store.queries import ACTIVE_JOB, MOVED_COLUMNS, RECURS
from store.tables import PENDING, QUEUED, RUNNING

# A sweeper's batch: up to %s RUNNING executions matching {condition}, locked, skipping the rows
# another sweeper holds (disjoint batches). ARRAY(…) because it is evaluated once: as `id IN
# (SELECT … LIMIT … SKIP LOCKED)` the planner may re-scan the subquery inside its join, and each
# re-scan, no longer seeing the rows already moved, took more: a limit of 2 moved 5.
RUNNING_BATCH = (
    "id = ANY(ARRAY(SELECT id FROM executions_execution WHERE state = 'RUNNING' AND {condition}"
    " LIMIT %s FOR UPDATE SKIP LOCKED))"
)
# A pool sample's bucket. date_part, not EXTRACT: EXTRACT gives numeric (PostgreSQL 14 on), slow
# over a week's minutes.
SAMPLE_BUCKET = "CAST(floor(date_part('epoch', s.at - %s) / %s) AS INTEGER)"

ID_IN = "id = ANY(%s)"
NOTIFY = "SELECT pg_notify(%s, %s)"
CLOCK = "SELECT clock_timestamp()"

# --- moves with their events, in one statement ---------------------------------------------------------

# What a single-row move reads back from its CTE `moved`.
MOVED_ONE = "id, attempt, worker_id, job_id, tenant_id, run_id, step, event_id"
MOVED_ONE_READ = f"SELECT {MOVED_ONE} FROM moved"
# What a start reads back besides: its pool and trace context, for the run's span.
STARTED = f"{MOVED_ONE}, pool, traceparent"
# And what its handler needs, from the job and the tenant.
STARTED_CONTEXT = (
    f"SELECT {', '.join('moved.' + c for c in STARTED.split(', '))},"
    " j.handler, j.payload, t.slug, t.signing_secret, j.rate_limit"
    " FROM moved JOIN jobs_job j ON j.id = moved.job_id JOIN tenants_tenant t ON t.id = moved.tenant_id"
)
# A workflow step's own timeout, if it has one (jobs/workflow.py), else its job's, from now (%s).
STEP_OR_JOB_TIMEOUT = (
    "timeout_at = %s + interval '1 second' * COALESCE("
    "(SELECT (s->>'timeout_sec')::int FROM executions_run r, jsonb_array_elements(r.steps) s"
    " WHERE r.id = executions_execution.run_id AND s->>'name' = executions_execution.step),"
    " (SELECT timeout_sec FROM jobs_job WHERE jobs_job.id = executions_execution.job_id))"
)

# The events of the rows an UPDATE … RETURNING id, attempt, worker_id, history_derived named `moved`
# changed by a move of the happy path: none for a row whose history is derived (store/history.py).
# Its parameters are the time, the source, the target and the message.
EVENTS_OF_MOVED = (
    "INSERT INTO executions_executionevent (execution_id, at, from_state, to_state, attempt, worker_id, message)"
    " SELECT id, %s, %s, %s, attempt, worker_id, %s FROM moved WHERE NOT history_derived"
)
# An UPDATE of executions ({move}) on the happy path with an event per row it moved whose history
# is rows.
WITH_EVENTS = "WITH moved AS ({move} RETURNING {returning}, history_derived), events AS (" + EVENTS_OF_MOVED + ")"
# A set-based move (store.queries.MOVE_SET) on the happy path with its events.
MOVE_SET_WITH_EVENTS = (
    "WITH moved AS ({move}, history_derived), events AS (" + EVENTS_OF_MOVED + f") SELECT {MOVED_COLUMNS} FROM moved"
)

# A move off the happy path, in one statement: the rows it moves as they were, locked (`old`:
# their history_derived and started_at, which a release clears), the move ({move}: an UPDATE of
# executions … FROM old, which sets history_derived false) and, in one INSERT and in this order,
# each row's derived events, if its history was derived (store/history.derived_events: the
# columns still say them, started_at as it was), then the move's own event. MATERIALIZED: `old` is
# read once, and the UPDATE joins the rows it locked. Parameters: {old}'s, then {move}'s, then
# MATERIALISED_EVENTS's.
OLD = (
    "old AS MATERIALIZED (SELECT id AS old_id, history_derived AS was_derived, started_at AS was_started_at"
    " FROM executions_execution WHERE {old} FOR UPDATE)"
)
# What the statement reads back of `moved` for its events, after what the caller reads.
MATERIALISED_RETURNING = "was_derived, created_at, origin AS made_by, run_id AS made_in_run, queued_at, was_started_at"
# Parameters: how many of the derived events the source state has (PENDING 1, QUEUED 2, RUNNING 3:
# made, queued, started), the made event's messages (a root step's, a trigger's, an event's, else),
# then the move's time, source, target and message.
MATERIALISED_EVENTS = (
    "INSERT INTO executions_executionevent (execution_id, at, from_state, to_state, attempt, worker_id, message)"
    " SELECT m.id, ev.at, ev.from_state, ev.to_state, ev.attempt, ev.worker_id, ev.message"
    " FROM moved m CROSS JOIN LATERAL (VALUES"
    " (1, m.created_at, '', 'PENDING', 1, '', CASE WHEN m.made_in_run IS NOT NULL THEN %s::text"
    " WHEN m.made_by = 'TRIGGER' THEN %s::text WHEN m.made_by = 'EVENT' THEN %s::text ELSE %s::text END),"
    " (2, m.queued_at, 'PENDING', 'QUEUED', m.attempt, '', ''),"
    " (3, m.was_started_at, 'QUEUED', 'RUNNING', m.attempt, m.worker_id, %s::text),"
    " (4, %s::timestamptz, %s::text, %s::text, m.attempt, m.worker_id, %s::text)"
    ") AS ev(n, at, from_state, to_state, attempt, worker_id, message)"
    " WHERE ev.n = 4 OR (m.was_derived AND ev.n <= %s::integer)"
    " ORDER BY m.id, ev.n"
)


def materialised_params(*, source: str, target: str, now: datetime, message: str) -> list:
    """MATERIALISED_EVENTS's parameters for a move from `source` to `target`."""
    return [
        ROOT_STEP_MESSAGE,
        CREATED_BY["TRIGGER"],
        CREATED_BY["EVENT"],
        SCHEDULED_MESSAGE,
        STARTED_MESSAGE,
        now,
        str(source),
        str(target),
        message,
        DERIVED_BEFORE.get(str(source), 0),
    ]


# How many of the derived events (made, queued, started) an execution in a state has.
DERIVED_BEFORE = {PENDING: 1, QUEUED: 2, RUNNING: 3}


MATERIALISING = "WITH " + OLD + ", moved AS ({move} RETURNING {returning}), events AS (" + MATERIALISED_EVENTS + ")"
# A set-based move off the happy path: MATERIALISING's, over the rows in {source} matching {where}.
MOVE_SET_MATERIALISING = (
    "WITH "
    + OLD.replace("{old}", "state = %s AND ({where})")
    + ", moved AS (UPDATE executions_execution SET state = %s, updated_at = %s, history_derived = false{assignments}"
    " FROM old WHERE executions_execution.id = old.old_id AND executions_execution.state = %s"
    f" RETURNING {MOVED_COLUMNS}, {MATERIALISED_RETURNING}), events AS ("
    + MATERIALISED_EVENTS
    + f") SELECT {MOVED_COLUMNS} FROM moved"
)
# Where MATERIALISING's UPDATE joins `old` (its own WHERE follows).
FROM_OLD = ' FROM old WHERE "executions_execution"."id" = old.old_id AND '

# A fire that succeeded starts its job's count of consecutive failed fires again
# (Store.count_failed_fire), as a step of the statement that moved the executions in {moved}
# (columns job_id, run_id) to SUCCEEDED; a workflow step is left to its run's settling. Only the
# rows that counted some are written, so a job without failures costs no write.
RESET_FAILED_FIRES = (
    ", reset AS (UPDATE jobs_job SET failed_fires = 0 FROM {moved}"
    " WHERE jobs_job.id = {moved}.job_id AND {moved}.run_id IS NULL AND jobs_job.failed_fires > 0)"
)

# A worker's successes, each under its lease token, with their events (at each run's finish, for
# the rows whose history is not derived: store/history.py). Their one-off jobs' ends are read, not
# written (executions/standing.py).
SUCCEED_MANY = (
    "WITH v AS (SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::jsonb[], %s::timestamptz[])"
    " AS v(id, lease_token, result, finished_at)),"
    " moved AS (UPDATE executions_execution e SET state = %s, updated_at = v.finished_at,"
    " finished_at = v.finished_at, result = v.result FROM v"
    " WHERE e.id = v.id AND e.state = %s AND e.lease_token = v.lease_token"
    f" RETURNING {', '.join('e.' + c for c in MOVED_ONE.split(', '))}, e.history_derived, v.finished_at),"
    " events AS (INSERT INTO executions_executionevent"
    " (execution_id, at, from_state, to_state, attempt, worker_id, message)"
    " SELECT id, finished_at, %s, %s, attempt, worker_id, 'succeeded' FROM moved WHERE NOT history_derived)"
    + RESET_FAILED_FIRES.format(moved="moved")
    + " SELECT id, job_id, tenant_id FROM moved"
)

# --- inserts -------------------------------------------------------------------------------------------

# Events from three arrays (execution ids, attempts, worker ids): the time, source, target, message.
RECORD_EVENTS = (
    "INSERT INTO executions_executionevent"
    " (execution_id, at, from_state, to_state, attempt, worker_id, message)"
    " SELECT r.execution_id, %s, %s::text, %s::text, r.attempt, r.worker_id, %s::text"
    " FROM unnest(%s::uuid[], %s::integer[], %s::text[]) AS r(execution_id, attempt, worker_id)"
)


# A fire's key in execution_job_fire as executions/models.py spells it (the last expression
# non-NULL for SCHEDULE rows only), for `e`, an execution, and `v`, a fire of create_fires.
_SAME_FIRE = (
    "e.job_id = v.job_id AND e.scheduled_for = v.scheduled_for AND e.step = ''"
    " AND (CASE WHEN e.origin = 'SCHEDULE' THEN true END) = true"
)


def create_fires(*, traced: bool, racing: bool = False) -> str:
    """Cron fires from arrays, each unless it exists already; their trace contexts only when
    `traced` (else the column's default). Their history is derived (store/history.py): no event
    row. Reads back how many were made.

    A fire made already is found by a probe of execution_job_fire and not inserted (a LATERAL
    subquery: a probe per fire; NOT EXISTS was planned as a hash anti-join that read the whole
    table, EXPLAIN):
    a plain insertion then, not ON CONFLICT's speculative one, which was a fifth of the statement's
    time (a speculative lock and a confirmation record per row: bench/README.md). Only a fire
    another transaction is making at that moment passes the probe; its insertion then fails on the
    unique index (which still makes a second fire impossible), and with `racing` the statement is
    made again with ON CONFLICT DO NOTHING, which waits for that transaction and skips its fire."""
    return (
        "WITH v AS (SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::varchar[], %s::smallint[],"
        f" %s::timestamptz[]{', %s::varchar[]' if traced else ''})"
        f" AS v(job_id, tenant_id, pool, priority, scheduled_for{', traceparent' if traced else ''})),"
        " made AS (INSERT INTO executions_execution (id, job_id, tenant_id, pool, priority, origin, attempt,"
        " state, scheduled_for, available_at, lease_token, publish_count, worker_id, error, traceback,"
        f" step, created_at, updated_at, history_derived{', traceparent' if traced else ''})"
        " SELECT gen_random_uuid(), v.job_id, v.tenant_id, v.pool, v.priority, %s, 1, %s, v.scheduled_for,"
        f" v.scheduled_for, 0, 0, '', '', '', '', %s, %s, true{', v.traceparent' if traced else ''} FROM v"
        + (
            " ON CONFLICT (job_id, scheduled_for, step, (CASE WHEN origin = 'SCHEDULE' THEN true END)) DO NOTHING"
            if racing
            else f" LEFT JOIN LATERAL (SELECT true AS made FROM executions_execution e WHERE {_SAME_FIRE} LIMIT 1)"
            " AS f ON true WHERE f.made IS NULL"
        )
        + " RETURNING id) SELECT count(*) FROM made"
    )


# Jobs' next fires from two arrays (job ids, times), joined by primary key. No indexed column
# changes, so the row's new version stays on its page (a HOT update: jobs 0008).
ADVANCE_JOBS = (
    "UPDATE jobs_job SET next_fire_at = v.fire"
    " FROM unnest(%s::uuid[], %s::timestamptz[]) AS v(id, fire) WHERE jobs_job.id = v.id"
)

# --- the claim (store/postgres/admission.py) -----------------------------------------------------------

# A pool's claim lock (a key of the claim's space and the pool's name hashed), tried, not waited
# for, and held until the transaction ends; once it is held, the pool's claim stamp counts this
# claim (an upsert works on the stamp's last committed version, whatever the statement's snapshot)
# and says what it is now; the claim's commit made asynchronous. No row: another claim has the pool.
# Parameters: the pool, the lock's key, the pool.
CLAIM_POOL = (
    "INSERT INTO pools_poolclock (pool, virtual_time, claims) SELECT %s, 0, 1"
    " WHERE pg_try_advisory_xact_lock(%s, hashtext(%s))"
    " AND set_config('synchronous_commit', 'off', true) IS NOT NULL"
    " ON CONFLICT (pool) DO UPDATE SET claims = pools_poolclock.claims + 1 RETURNING claims"
)
# The lock of what spans pools (tenants' concurrency limits, named rate limits), waited for.
CLAIM_ACROSS_POOLS = "SELECT pg_advisory_xact_lock(%s, 0)"

# Which of some pools (an array) have anything due (the parameter after it): one probe of
# (pool, priority, available_at) per pool and level, in one round trip. Ordered as that index is,
# so that the planner probes it: without, a LIMIT 1 whose match it expected soon (a pool's due
# rows just claimed, the statistics not yet told) was a sequential scan, 9 ms a claim.
POOLS_WITH_DUE = (
    "SELECT p.pool FROM unnest(%s::text[]) AS p(pool) WHERE EXISTS ("
    " SELECT 1 FROM (VALUES (0), (1), (2)) AS level(priority) CROSS JOIN LATERAL ("
    "  SELECT 1 FROM executions_execution e WHERE e.state = 'PENDING' AND e.pool = p.pool"
    "  AND e.priority = level.priority AND e.available_at <= %s ORDER BY e.available_at LIMIT 1) AS due)"
)

# A pool's due work in order: one probe per priority level of (pool, priority, available_at), each
# stopped at the limit. Parameters: pool, now, limit, limit.
DUE_IN_POOL = (
    "SELECT due.id, due.cron, due.tenant_id, due.priority"
    " FROM (VALUES (0), (1), (2)) AS level(priority) CROSS JOIN LATERAL ("
    f"  SELECT e.id, {RECURS} AS cron, e.tenant_id, e.priority FROM executions_execution e {ACTIVE_JOB}"
    "  WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = level.priority AND e.available_at <= %s"
    "  ORDER BY e.available_at LIMIT %s"
    ") AS due LIMIT %s"
)


def _present_cte(name: str) -> str:
    """A recursive CTE `name(id)`: the tenants that have PENDING work in a pool at a priority (its
    two pairs of parameters: pool, priority), found by a skip scan of the partial index (pool,
    priority, tenant_id, available_at) that jumps from one tenant to the next, one probe each.
    Probing every tenant instead cost a probe per tenant in the system at every contended claim
    (bench/README.md, "The store's shapes")."""
    present = (
        "SELECT e.tenant_id FROM executions_execution e WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s"
    )
    return (
        f"{name}(id) AS (({present} ORDER BY e.tenant_id LIMIT 1)"
        f" UNION ALL SELECT ({present} AND e.tenant_id > p.id ORDER BY e.tenant_id LIMIT 1)"
        f" FROM {name} p WHERE p.id IS NOT NULL)"
    )


def shares(levels: list[int]) -> str:
    """The weight, concurrency limit, finish tag and pool clock of the tenants with PENDING work in
    a pool at any of `levels`. Parameters: (pool, level, pool, level) per level, then pool, pool."""
    ctes = ", ".join(_present_cte(f"present{level}") for level in levels)
    return (
        f"WITH RECURSIVE {ctes}"
        " SELECT t.id, t.weight, t.max_concurrent_executions, COALESCE(s.finish_tag, 0), c.virtual_time"
        " FROM tenants_tenant t LEFT JOIN pools_tenantshare s ON s.tenant_id = t.id AND s.pool = %s"
        " LEFT JOIN pools_poolclock c ON c.pool = %s"
        f" WHERE t.id IN ({' UNION '.join(f'SELECT id FROM present{level}' for level in levels)})"
    )


# Each tenant's earliest PENDING execution in a pool at a priority, by a skip scan; when its job is
# not active, a probe of its due work finds the first of an active job. Parameters: pool, priority
# (twice), pool, priority, now, now, the tenant ids.
_FIRST = (
    "SELECT e.tenant_id, e.available_at, e.job_id FROM executions_execution e"
    " WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s"
)
DUE_HEADS = (
    f"WITH RECURSIVE present(id, at, job_id) AS (({_FIRST} ORDER BY e.tenant_id, e.available_at LIMIT 1)"
    " UNION ALL SELECT n.* FROM present p CROSS JOIN LATERAL"
    f" ({_FIRST} AND e.tenant_id > p.id ORDER BY e.tenant_id, e.available_at LIMIT 1) AS n)"
    " SELECT p.id, CASE WHEN j.state = 'ACTIVE' THEN p.at ELSE ("
    f"  SELECT e.available_at FROM executions_execution e {ACTIVE_JOB}"
    "  WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s AND e.tenant_id = p.id"
    "  AND e.available_at <= %s ORDER BY e.available_at LIMIT 1"
    ") END FROM present p JOIN jobs_job j ON j.id = p.job_id"
    " WHERE p.at <= %s AND p.id = ANY(%s::bigint[])"
)

# For each tenant (arrays of tenant ids and quotas), up to its quota of its due executions in a
# pool at a priority. Parameters: the arrays, pool, priority, now.
DUE_OF_TENANTS = (
    "SELECT due.id, due.cron, due.tenant_id, due.priority"
    " FROM unnest(%s::bigint[], %s::integer[]) AS q(tenant_id, quota) CROSS JOIN LATERAL ("
    f"  SELECT e.id, {RECURS} AS cron, e.tenant_id, e.priority FROM executions_execution e {ACTIVE_JOB}"
    "  WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s AND e.tenant_id = q.tenant_id"
    "  AND e.available_at <= %s ORDER BY e.available_at LIMIT q.quota"
    ") AS due"
)

# The tags a claim moved on (arrays of tenant ids and tags) and its pool's clock, in one statement.
SAVE_SHARES = (
    "WITH shares AS (INSERT INTO pools_tenantshare (pool, tenant_id, finish_tag)"
    " SELECT %s, v.tenant_id, v.tag FROM unnest(%s::bigint[], %s::float8[]) AS v(tenant_id, tag)"
    " ON CONFLICT (tenant_id, pool) DO UPDATE SET finish_tag = EXCLUDED.finish_tag)"
    " INSERT INTO pools_poolclock (pool, virtual_time) VALUES (%s, %s)"
    " ON CONFLICT (pool) DO UPDATE SET virtual_time = EXCLUDED.virtual_time"
)

# --- the dashboard's reads (store/postgres/reads.py) -----------------------------------------------------

# p50 and p99 of the start lag per minute of start and over all, around the ORM's query of the
# started rows ({rows}: columns started_at, lag).
START_LAGS = """
    SELECT date_trunc('minute', started_at) AS minute, count(*),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY lag),
           percentile_cont(0.99) WITHIN GROUP (ORDER BY lag)
    FROM ({rows}) AS rows
    GROUP BY GROUPING SETS ((date_trunc('minute', started_at)), ())
"""
STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = {milliseconds}"
STATEMENT_TIMEOUT_DEFAULT = "SET LOCAL statement_timeout TO DEFAULT"
