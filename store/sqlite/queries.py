"""The embedded default's own named queries (SQLite); those both stores run are in
store/queries.py."""

from store.queries import ACTIVE_JOB, RECURS

# A sweeper's batch: up to %s RUNNING executions matching {condition}. No row locks: one writer
# at a time.
RUNNING_BATCH = "id IN (SELECT id FROM executions_execution WHERE state = 'RUNNING' AND {condition} LIMIT %s)"
# A pool sample's bucket: whole buckets (seconds, the second parameter) since the first
# parameter. Half a second more: julianday's arithmetic is in floating point.
SAMPLE_BUCKET = "CAST(((julianday(s.at) - julianday(%s)) * 86400.0 + 0.5) / %s AS INTEGER)"

# --- the claim -------------------------------------------------------------------------------------

# Up to %s executions of active jobs due in a pool: HIGH priority first, then by due time.
DUE_IN_POOL = (
    f"SELECT e.id, {RECURS}, e.tenant_id, e.priority FROM executions_execution e {ACTIVE_JOB}"
    " WHERE e.state = 'PENDING' AND e.pool = %s AND e.available_at <= %s"
    " ORDER BY e.priority, e.available_at LIMIT %s"
)
# Whether a pool has anything due (of an active job or not).
POOL_HAS_DUE = (
    "SELECT 1 FROM executions_execution e WHERE e.state = 'PENDING' AND e.pool = %s AND e.available_at <= %s LIMIT 1"
)
# Every tenant's weight, concurrency limit and finish tag in a pool.
SHARES = (
    "SELECT t.id, t.weight, t.max_concurrent_executions, COALESCE(s.finish_tag, 0)"
    " FROM tenants_tenant t LEFT JOIN pools_tenantshare s ON s.tenant_id = t.id AND s.pool = %s"
)
# One tenant's executions due in a pool at a priority, up to its quota, in due order.
DUE_OF_TENANT = (
    f"SELECT e.id, {RECURS}, e.tenant_id, e.priority FROM executions_execution e {ACTIVE_JOB}"
    " WHERE e.state = 'PENDING' AND e.pool = %s AND e.priority = %s AND e.tenant_id = %s"
    " AND e.available_at <= %s ORDER BY e.available_at LIMIT %s"
)
