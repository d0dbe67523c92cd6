"""The rows the store's operations take and return, typed the same by every store."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple


class Moved(NamedTuple):
    """A row that a set-based move changed, as the UPDATE returned it. A tuple: a claim makes a
    thousand at a time, five times faster than a frozen dataclass's."""

    id: uuid.UUID
    job_id: uuid.UUID
    tenant_id: int
    pool: str
    attempt: int
    lease_token: int
    worker_id: str
    priority: int
    origin: str
    scheduled_for: datetime
    run_id: uuid.UUID | None = None  # a workflow step's run
    traceparent: str = ""  # the trace it was made in (telemetry/tracing.py); "" when untraced


@dataclass(frozen=True)
class Fire:
    """A cron fire to make: a new PENDING execution of the job at `scheduled_for`."""

    job_id: uuid.UUID
    tenant_id: int
    pool: str
    priority: int
    scheduled_for: datetime
    traceparent: str = ""  # the fire's own trace (telemetry/tracing.py); "" when untraced


@dataclass(frozen=True)
class Started:
    """A run a worker has just started, with what its handler needs."""

    id: uuid.UUID
    job_id: uuid.UUID
    attempt: int
    handler: str
    payload: Any
    tenant_slug: str
    signing_secret: str
    run_id: uuid.UUID | None = None  # a workflow step's run, and the step's name
    step: str = ""
    event_id: uuid.UUID | None = None  # the event that started it, if one did
    pool: str = ""
    traceparent: str = ""  # the trace its run span joins (telemetry/tracing.py)
    rate_limit: str | None = None  # its job's target's rate limit, if it names one


@dataclass(frozen=True)
class Success:
    """A handler's return, to be recorded as SUCCEEDED under the lease it ran with."""

    execution_id: Any
    lease_token: int
    result: Any
    finished_at: datetime
    # A workflow step's run: the step's success settles it in the same transaction (executions/steps.py).
    run_id: Any = None


@dataclass(frozen=True)
class Republished:
    """A QUEUED execution to publish again (the sweeper's `republish_stalled`)."""

    id: uuid.UUID
    lease_token: int
    pool: str
    priority: int


@dataclass(frozen=True)
class Beat:
    """What a heartbeat read back: whether the run was asked to stop, and when it times out."""

    cancel_requested_at: datetime | None
    timeout_at: datetime | None


# (execution id, job id, tenant id, new state) per execution moved: what observers hear.
Change = tuple[Any, Any, int, str]


class FailedFire(NamedTuple):
    """A fire counted as failed (Store.count_failed_fire): its job, the job's consecutive failed
    fires now, and the count at which the job is to pause (its pause_after_failures)."""

    job_id: uuid.UUID
    failed_fires: int
    threshold: int


# What a set-based move returns: the rows it moved, and their changes for the observers.
MovedSet = tuple[list[Moved], list[Change]]

# A row of the claim: (execution id, whether its job recurs (CRON or INTERVAL: the claim makes its
# next fire), tenant id, priority).
DueRow = tuple[uuid.UUID, bool, int, int]


class Snapshot(NamedTuple):
    # The live workers, summed per pool: ([pool], slots, busy, rate, how many workers).
    workers: list[tuple[list[str], int, int, float, int]]
    admitted: list[tuple[str, int, str, int]]  # (pool, tenant id, QUEUED or RUNNING, count)
    limits: dict[int, int]  # tenant id: its concurrency limit, for those that have one
    paused: frozenset[str] = frozenset()  # pools an operator paused: nothing of them is admitted
    stamps: dict[str, int] = {}  # pool: its claims so far (pools.models.PoolClock.claims)


def as_uuid(value: Any) -> uuid.UUID:
    """An id as raw SQL returns it, as the ORM would: SQLite keeps UUIDs as 32 hex digits."""
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def due_row(row: tuple[Any, ...]) -> DueRow:
    execution_id, cron, tenant_id, priority = row
    return (
        execution_id if isinstance(execution_id, uuid.UUID) else uuid.UUID(execution_id),
        bool(cron),
        tenant_id,
        priority,
    )


# Start lags per minute of start: {minute: (p50, p99)}, and over all: (count, p50, p99); seconds.
PerMinute = dict[datetime, tuple[float | None, float | None]]
Overall = tuple[int, float | None, float | None]
