"""The named queries both stores run (store/shared.py), in portable SQL; each store's own are
beside it (store/sqlite/queries.py, store/postgres/queries.py). `{name}` slots are filled in by
the store with its own fragments (never a caller's text); `%s` are parameters."""

# What a set-based move reads back of each row it moved (store.rows.Moved).
MOVED_COLUMNS = (
    "id, job_id, tenant_id, pool, attempt, lease_token, worker_id, priority, origin, scheduled_for, run_id, traceparent"
)

# Whether the job fires by a schedule (jobs.models.RECURRING_TYPES).
RECURS = "j.type IN ('CRON', 'INTERVAL')"
ACTIVE_JOB = "JOIN jobs_job j ON j.id = e.job_id AND j.state = 'ACTIVE'"

# --- executions --------------------------------------------------------------------------------------

# A RUNNING run's lease extended for the worker holding its lease token; what it must know back.
HEARTBEAT = (
    "UPDATE executions_execution SET lease_expires_at = %s, heartbeat_at = %s"
    " WHERE id = %s AND state = 'RUNNING' AND lease_token = %s"
    " RETURNING cancel_requested_at, timeout_at"
)

# A set-based move: the state, its time, {assignments}; the source state, then {where}'s parameters.
MOVE_SET = (
    "UPDATE executions_execution SET state = %s, updated_at = %s{assignments}"
    " WHERE state = %s AND ({where})"
    f" RETURNING {MOVED_COLUMNS}"
)
STEPS_OF_RUN = "run_id = %s AND step IN ({names})"
# The ids of the executions in a state matching {where}: the rows a set-based move will move.
IDS_IN_STATE = "SELECT id FROM executions_execution WHERE state = %s AND ({where})"

# The sweeper's conditions, each over RUNNING executions, read through execution_timeout (every
# RUNNING row; bounded by the workers' slots): TIMED_OUT as a range of it, the other two by a walk of
# it all. No index on lease_expires_at, so that a HEARTBEAT is a HOT update (executions/models.py).
LEASE_EXPIRED = "lease_expires_at < %s AND cancel_requested_at IS NULL"
TIMED_OUT = "timeout_at < %s AND cancel_requested_at IS NULL"
CANCEL_UNHEEDED = "cancel_requested_at IS NOT NULL AND (cancel_requested_at < %s OR lease_expires_at < %s)"

# What the named set moves write beside the state.
# A turn an execution held under its rate limit is used once queued (scheduling/rate_limiting.py).
QUEUED_UNDER_A_NEW_LEASE = (
    "lease_token = lease_token + 1, queued_at = %s, republish_at = %s, publish_count = 1, rate_turn_at = NULL"
)
FINISHED_WITH_ERROR = "finished_at = %s, error = %s, error_fingerprint = %s"
FINISHED_NOW = "finished_at = %s"
DUE_NOW = "available_at = %s"
# A step waits again; one that had started runs again as its next attempt.
REBLOCKED = "attempt = attempt + (CASE WHEN started_at IS NULL THEN 0 ELSE 1 END), error = '', traceback = ''"

# --- reads -------------------------------------------------------------------------------------------

JOB_ROWS = "SELECT {columns} FROM jobs_job WHERE {where}"

NEXT_DUE_AT = """
    SELECT e.available_at FROM executions_execution e
    WHERE e.state = 'PENDING' AND e.available_at > %s
      AND EXISTS (SELECT 1 FROM jobs_job j WHERE j.id = e.job_id AND j.state = 'ACTIVE')
    ORDER BY e.available_at
    LIMIT 1
"""

# ORDER BY: a walk of the due index from its start. Without it the planner may take LIMIT 1 as a
# reason to scan the whole table (seen in EXPLAIN).
ANYTHING_DUE = (
    f"SELECT 1 FROM executions_execution e {ACTIVE_JOB}"
    " WHERE e.state = 'PENDING' AND e.available_at <= %s ORDER BY e.available_at LIMIT 1"
)

# Whether anything waits BLOCKED (a workflow step for its upstream, a BUFFER_ONE fire for the run
# before it): one probe of an index that leads with the state. Most dispatcher passes find
# nothing, and the release's own reads (joins the ORM builds and PostgreSQL plans on each call,
# ~2.5 ms) were half a dispatcher's CPU per job at 500 jobs/s.
ANYTHING_BLOCKED = "SELECT 1 FROM executions_execution WHERE state = 'BLOCKED' LIMIT 1"

# What a claim starts from: live workers ('w'), what is admitted ('a'), concurrency limits ('c'),
# paused pools ('p'). The admitted rows as an OR of their two states, each arm a read of that
# state's own partial index (execution_republish, execution_timeout): an IN list implies neither
# index's condition, and the state-ordered indexes leave those rows out (executions/models.py).
# What is admitted, per pool, tenant and state ({tenant}: e.tenant_id, {by}: ", e.tenant_id"), or
# per pool and state ("0", "").
SNAPSHOT_ADMITTED = (
    " UNION ALL SELECT 'a', e.pool, {tenant}, COUNT(*), CAST(e.state = 'QUEUED' AS INTEGER), 0"
    " FROM executions_execution e WHERE (e.state = 'QUEUED' OR e.state = 'RUNNING')"
    " GROUP BY e.pool{by}, e.state"
)
# The live workers summed per pool ({pools_of}: the store's set-returning function over a worker's
# pools, as `j` with a column `value`): a row per pool, not per worker (2,000 workers parsed and
# summed in Python were a tenth of a claim: bench stage dispatchers).
SNAPSHOT = (
    "SELECT 'w', j.value, COUNT(*), SUM(w.slots), SUM(w.busy), CAST(SUM(w.rate) AS REAL)"
    " FROM pools_worker w, {pools_of}"
    " WHERE w.stopped_at IS NULL AND w.last_seen_at >= %s GROUP BY j.value"
    "{admitted}"
    " UNION ALL SELECT 'c', NULL, t.id, t.max_concurrent_executions, 0, 0 FROM tenants_tenant t"
    " WHERE t.max_concurrent_executions IS NOT NULL"
    " UNION ALL SELECT 'p', p.pool, 0, 0, 0, 0 FROM pools_poolpause p"
    " UNION ALL SELECT 's', c.pool, c.claims, 0, 0, 0 FROM pools_poolclock c"
)

# What one pool has admitted, and what some tenants have in every pool: read by a claim once it
# holds the pool's lock, or the lock across pools (the state indexes hold only these rows).
POOL_ADMITTED = (
    "SELECT COALESCE(SUM(CASE WHEN e.state = 'QUEUED' THEN 1 ELSE 0 END), 0),"
    " COALESCE(SUM(CASE WHEN e.state = 'RUNNING' THEN 1 ELSE 0 END), 0)"
    " FROM executions_execution e WHERE (e.state = 'QUEUED' OR e.state = 'RUNNING') AND e.pool = %s"
)
TENANTS_ADMITTED = (
    "SELECT e.tenant_id, COUNT(*) FROM executions_execution e"
    " WHERE (e.state = 'QUEUED' OR e.state = 'RUNNING') AND e.tenant_id IN ({ids}) GROUP BY e.tenant_id"
)

# The pools' minute samples per bucket ({bucket}: the store's arithmetic) and pool; each column
# as it is ({due}: s.due) or summed over the tenants of a minute (SUM(s.due), with {grouped}).
POOL_BUCKETS = """
    SELECT m.b, m.pool, MAX(m.due), MAX(m.admitted), SUM(m.succeeded), SUM(m.failed), SUM(m.cancelled),
           SUM(m.started), SUM(m.p50w), MAX(m.p99)
    FROM (
        SELECT {bucket} AS b, s.at, s.pool, {due} AS due, {admitted} AS admitted, {succeeded} AS succeeded,
               {failed} AS failed, {cancelled} AS cancelled, {started} AS started, {p50w} AS p50w, {p99} AS p99
        FROM pools_poolsample s WHERE s.at >= %s AND s.at < %s{scoped}{grouped}
    ) AS m
    GROUP BY m.b, m.pool
"""
POOL_TOTALS = " AND s.tenant_id IS NULL"
POOL_TENANTS = " AND s.tenant_id IN ({ids})"
PER_MINUTE = " GROUP BY s.at, s.pool"

# A live API token by its key's hash, with its tenant: what every API request asks first.
TOKEN = (
    "SELECT {columns} FROM {tokens} t JOIN {tenants} n ON n.id = t.tenant_id"
    " WHERE t.key_hash = %s AND t.revoked_at IS NULL"
)

# --- the dashboard's reads ---------------------------------------------------------------------------------

# How many rows each walk has ({walks}: one scalar subquery per walk, each already capped).
WALK_COUNTS = "SELECT {walks}"
WALK_COUNT = "(SELECT COUNT(*) FROM ({walk}) AS walk)"
# Where a page's live feed starts: the newest execution event and the newest audit row.
LIVE_CURSORS = "SELECT (SELECT MAX(id) FROM executions_executionevent), (SELECT MAX(id) FROM dashboard_auditentry)"
