import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import models
from django.db.models import Case, Q, Value, When
from django.utils import timezone

from executions.states import BackfillState, ExecutionState


class Origin(models.TextChoices):
    SCHEDULE = "SCHEDULE"  # a fire of the job's schedule; a cron fire materialises the next one
    TRIGGER = "TRIGGER"  # "run now" by a person or a service; outside the schedule's chain
    EVENT = "EVENT"  # an event matched the job (events/)
    # A fire of a past range a backfill asked for (scheduling/backfills.py): never a misfire, and
    # outside the schedule's overlap policy (docs/backfill.md).
    BACKFILL = "BACKFILL"


# The states a run passes through on its way (claimed, then running): each row is in one for
# seconds, and their rows are few (what the workers' slots admit), each state with an index of its
# own (execution_republish, execution_timeout).
IN_FLIGHT = ("QUEUED", "RUNNING")
AT_REST = ~Q(state__in=IN_FLIGHT)


def in_states(states: Iterable[str]) -> Q:
    """Executions in any of `states`, spelt as ORs of equalities, never as an IN list: on
    PostgreSQL the state-ordered indexes leave out QUEUED and RUNNING rows, which have partial
    indexes of their own (executions.models.PartialOnPostgres), and the planner reads one index per
    arm of an OR (a BitmapOr) whose condition that arm implies, where an IN list implies none of
    them and is read by a scan of the whole table."""
    found = Q(pk__in=[])
    for state in states:
        found |= Q(state=state)
    return found


class PartialOnPostgres(models.Index):
    """An index whose `condition` holds where the store's planner proves it from the queries'
    own (store.proves_partial_indexes: PostgreSQL); whole elsewhere (SQLite).

    The state-ordered indexes (execution_tenant_state, execution_state, execution_activity) leave
    out the QUEUED and RUNNING rows on PostgreSQL: every version of a row writes an entry in every
    index it is in (a change of state is never a HOT update), and a run's queued and started
    versions wrote six there, of the 33 a job cost end to end. The lists of those two states read
    their own partial indexes instead, which hold every such row and no other (bounded by the
    workers' slots), and PostgreSQL's planner proves `state = 'SUCCEEDED'` implies the condition.
    A read of several states at once must spell them as ORs (`in_states`), so
    that each state's arm reads an index whose condition it implies: an IN list implies neither.

    SQLite's planner uses a partial index only when the query repeats the condition's own terms,
    which these reads do not: there they stay whole (one writer at a time, no write to save)."""

    def create_sql(self, model, schema_editor, using="", **kwargs):
        from store import store  # the store asks which database this is; it imports no model

        if store().proves_partial_indexes:
            return super().create_sql(model, schema_editor, using=using, **kwargs)
        whole = models.Index(fields=self.fields, name=self.name, db_tablespace=self.db_tablespace)
        return whole.create_sql(model, schema_editor, using=using, **kwargs)


class Run(models.Model):
    """One fire of a workflow job: an execution per step, sharing this run (scheduling/runs.py).

    The steps are kept as they were when the run began, so a change of the job's workflow never
    changes a run already going. A plain job's run is its execution and has no row here."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # run_job_history leads with it.
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="runs", db_index=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="runs", db_index=False)
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.SCHEDULE)
    scheduled_for = models.DateTimeField()
    # The workflow's steps, in model terms (jobs/workflow.py), in the order they were given.
    steps = models.JSONField()
    # The event that started it (events.Event's id), if an event did.
    event_id = models.UUIDField(null=True, blank=True)
    # The job's misfire and concurrency policies were applied to it (at its first step's claim).
    admitted = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["job", "-created_at"], name="run_job_history")]

    def __str__(self) -> str:
        return f"run {self.id} of {self.job_id}"


class Execution(models.Model):
    """One run of a job at one fire time, across its attempts.

    A retry reuses the row (attempt + 1); `lease_token` grows with every claim, and every write
    made on behalf of a worker is conditional on it (fencing).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # The job and tenant foreign keys have no index of their own: execution_job_fire and
    # execution_tenant_state lead with them. A state change rewrites every index entry of the row
    # (state is indexed, so no update is HOT), and a run makes three: each index costs three writes.
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="executions", db_index=False)
    # Copied from the job so the claim, the filters and the per-tenant views need no join. No
    # constraint in the database: it is always its job's tenant, which the job's own key holds, and
    # its check at commit was a sixth of a cron fire's cost (an SPI query and a row lock per new
    # row: bench/README.md). A tenant's deletion still takes its executions: Django's collector
    # cascades by this field (and by the job's), not by the database's constraint.
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="executions", db_index=False, db_constraint=False
    )
    pool = models.CharField(max_length=64)
    priority = models.PositiveSmallIntegerField(default=1)
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.SCHEDULE)
    # A workflow step: its run and its name there. Null and "" for a plain job's execution.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, null=True, blank=True, related_name="executions", db_index=False
    )
    # db_default too: rows inserted by SQL of their own (the benchmark, data loads) need not name it.
    step = models.CharField(max_length=100, blank=True, default="", db_default="")
    # The event that started it (events.Event's id), if an event did: the handler's ctx.event.
    event_id = models.UUIDField(null=True, blank=True)
    attempt = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=20, choices=ExecutionState.choices, default=ExecutionState.PENDING)
    scheduled_for = models.DateTimeField()
    available_at = models.DateTimeField()
    lease_token = models.BigIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    timeout_at = models.DateTimeField(null=True, blank=True)
    # QUEUED rows not started by then are published again; the grace doubles each time.
    republish_at = models.DateTimeField(null=True, blank=True)
    publish_count = models.PositiveIntegerField(default=0)
    queued_at = models.DateTimeField(null=True, blank=True)
    # A PENDING execution over its rate limit holds a turn (pools/rate_limits.py): it is due then
    # (available_at) and admitted without asking the limit again. Cleared when it is queued.
    rate_turn_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    worker_id = models.CharField(max_length=200, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The error's kind (executions/fingerprints.py), written by the transition that records the
    # error, in the same statement: the dead letter groups by it through execution_dead_letter.
    error_fingerprint = models.CharField(max_length=16, blank=True, default="", db_default="")
    traceback = models.TextField(blank=True)
    checkpoint = models.JSONField(null=True, blank=True)
    # The W3C trace context the execution was made in, when tracing is on (telemetry/tracing.py):
    # its dispatch and every attempt's run join that trace. "" when off, and for older rows.
    traceparent = models.CharField(max_length=55, blank=True, default="", db_default="")
    # The time of its first event: the creating transition's `now` (the same clock as every other
    # time of its history), not the moment of the INSERT, so that event can be read from here.
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    # Whether its history is read from its columns (store/history.py): true while it is on the
    # happy path (no ExecutionEvent row yet), false once a move off it wrote the history as rows.
    # False for the rows made before (their history is rows) and for rows made by SQL of its own.
    history_derived = models.BooleanField(default=True, db_default=False)

    class Meta:
        ordering = ["-scheduled_for", "-created_at"]
        constraints = [
            # Two dispatchers can never materialise the same fire of a schedule (or a step of
            # it) twice: unique on (job, scheduled_for, step) among the SCHEDULE rows. The other
            # origins' rows are in it too, their last key NULL, which no other key equals (a
            # unique index's NULLs are distinct, on both stores), so that this one index is also
            # a job's history in schedule order (job, scheduled_for: last_runs, a job's
            # executions, backfills, overlap). It was a partial unique index beside a history
            # index of (job, scheduled_for), and every row version wrote an entry in both: a run
            # writes four (made, queued, started, ended), so this saves four a run.
            models.UniqueConstraint(
                "job",
                "scheduled_for",
                "step",
                Case(When(origin="SCHEDULE", then=Value(True)), output_field=models.BooleanField()),
                name="execution_job_fire",
            ),
            models.CheckConstraint(condition=Q(state__in=ExecutionState.values), name="execution_state_valid"),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="execution_attempt_positive"),
            models.CheckConstraint(
                condition=~Q(state="RUNNING") | Q(lease_expires_at__isnull=False, started_at__isnull=False),
                name="execution_running_has_lease",
            ),
            models.CheckConstraint(
                condition=~Q(state="QUEUED") | Q(queued_at__isnull=False, republish_at__isnull=False),
                name="execution_queued_has_times",
            ),
        ]
        indexes = [
            # The due index: the dispatcher's only read. Its size is what is pending, not all history.
            models.Index(fields=["available_at"], condition=Q(state="PENDING"), name="execution_due"),
            # The claim walks this one per pool and priority level, in due order, and stops at
            # what the pool can admit (scheduling/admission.py).
            models.Index(
                fields=["pool", "priority", "available_at"], condition=Q(state="PENDING"), name="execution_due_pool"
            ),
            # A contended claim asks each tenant for its due work: one probe per tenant.
            models.Index(
                fields=["pool", "priority", "tenant", "available_at"],
                condition=Q(state="PENDING"),
                name="execution_due_tenant",
            ),
            # The executions whose rate-limit turn has come, each claim's first read of a pool where
            # limits are defined (scheduling/rate_limiting.py): only those holding turns are in it.
            models.Index(
                fields=["pool", "rate_turn_at"],
                condition=Q(state="PENDING", rate_turn_at__isnull=False),
                name="execution_turn",
            ),
            # Every RUNNING row, by its timeout: the sweeper's three reads (store/queries.py
            # TIMED_OUT by range; LEASE_EXPIRED and CANCEL_UNHEEDED walk it whole, RUNNING rows
            # being bounded by the workers' slots). No index holds `lease_expires_at` or
            # `heartbeat_at`, so a heartbeat, which writes only those, can be a HOT update.
            models.Index(fields=["timeout_at"], condition=Q(state="RUNNING"), name="execution_timeout"),
            models.Index(fields=["republish_at"], condition=Q(state="QUEUED"), name="execution_republish"),
            models.Index(fields=["run"], condition=Q(run__isnull=False), name="execution_run"),
            # The lists by state (the API's, the dashboard's), without the rows in flight: see
            # PartialOnPostgres for why QUEUED and RUNNING are left out, and on PostgreSQL only.
            PartialOnPostgres(
                fields=["tenant", "state", "-scheduled_for"], condition=AT_REST, name="execution_tenant_state"
            ),
            PartialOnPostgres(fields=["state", "-scheduled_for"], condition=AT_REST, name="execution_state"),
            # The dashboard's last-hour charts read a bounded range of it. Partial, so a row enters
            # it once it has finished (one index write per run, not one per transition).
            models.Index(fields=["finished_at"], condition=Q(finished_at__isnull=False), name="execution_finished"),
            # The dead letter by error group: a GROUP BY of the DEAD rows' index entries only,
            # and a group's newest rows in order.
            models.Index(
                fields=["error_fingerprint", "-finished_at"], condition=Q(state="DEAD"), name="execution_dead_letter"
            ),
            # The executions page, newest activity first: one short walk per state, merged.
            PartialOnPostgres(fields=["state", "-updated_at"], condition=AT_REST, name="execution_activity"),
        ]

    def __str__(self) -> str:
        return f"{self.id} #{self.attempt} {self.state}"


# Set while retention deletes executions whose events the store drops whole with their partition.
_HISTORY_LEFT_TO_PARTITIONS: ContextVar[bool] = ContextVar("history_left_to_partitions", default=False)


@contextmanager
def history_left_to_partitions(left: bool) -> Iterator[None]:
    """Executions deleted inside leave their events behind (`left`): retention on a store whose
    history is partitioned by day, which drops them whole with their partition instead of one by
    one (store/postgres/partitions.py)."""
    token = _HISTORY_LEFT_TO_PARTITIONS.set(left)
    try:
        yield
    finally:
        _HISTORY_LEFT_TO_PARTITIONS.reset(token)


def history_cascade(collector, field, sub_objs, using) -> None:  # Django's on_delete
    """CASCADE, as Django emulates it (one DELETE of the events by their executions' ids), but
    inside `history_left_to_partitions(True)`: then the events stay, orphans nobody reads (every
    reader goes by its execution), until their day's partition is dropped. Any other deletion of
    an execution (a tenant's, a job's, in the admin) still forgets its history at once."""
    if not _HISTORY_LEFT_TO_PARTITIONS.get():
        models.CASCADE(collector, field, sub_objs, using)


# The events are not read to decide: CASCADE then deletes them by a query, never loading them.
history_cascade.lazy_sub_objs = True  # type: ignore[attr-defined]


class ExecutionEvent(models.Model):
    """Append-only history: one row per state transition (and per notable non-transition), for
    the executions whose history is not read from their own columns (store/history.py: a happy
    run has no rows here; executions/history.py reads both).

    On PostgreSQL the table is partitioned by day of `at` (migration 0021, store/postgres/
    partitions.py): its primary key there is (id, at), ids unique by their one sequence, and it
    has no foreign key constraint, so that retention drops a day's partition whole instead of
    deleting its rows one by one (the executions it outlived are deleted first; nothing points at
    an event). The embedded default keeps a plain table, also without the constraint (one model
    for both); the store writes an event only with its execution's move, so none is an orphan but
    those retention leaves to their partition's drop."""

    # event_execution_at leads with it, so no index of its own.
    execution = models.ForeignKey(
        Execution, on_delete=history_cascade, related_name="events", db_index=False, db_constraint=False
    )
    at = models.DateTimeField()
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20)
    attempt = models.PositiveIntegerField()
    worker_id = models.CharField(max_length=200, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["execution", "at"], name="event_execution_at")]

    def __str__(self) -> str:
        return f"{self.execution_id} {self.from_state or '∅'}→{self.to_state}"


class ExecutionLog(models.Model):
    """A line a handler logged during one attempt (`ctx.log`, or the standard logging of its
    thread), written by the worker in batches (worker/log_capture.py, executions/logs.py).

    Keyed by attempt, not by lease: a worker whose lease moved on still writes its lines under
    its own attempt, never under the new one's. `seq` counts the attempt's lines from 1 in the
    order they were logged; a delivery of the same attempt after a release continues it."""

    # log_line_position leads with it, so no index of its own.
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="log_lines", db_index=False)
    attempt = models.PositiveIntegerField()
    seq = models.PositiveIntegerField()
    # The worker's wall clock when the line was logged: it orders nothing (seq does) and a line
    # is worth its time as the handler saw it; the database's clock would cost a round trip.
    at = models.DateTimeField()
    level = models.CharField(max_length=16)
    logger = models.CharField(max_length=200, blank=True)
    message = models.TextField(blank=True)
    # On the line that says an attempt's lines were dropped past its bound: how many. 0 on the rest.
    dropped = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["attempt", "seq"]
        constraints = [
            # The order of the lines, their pages and the cascade from a pruned execution all walk it.
            models.UniqueConstraint(fields=["execution", "attempt", "seq"], name="log_line_position"),
        ]
        indexes = [
            # "Were lines dropped?" is asked of every page of lines: the few lines that say so.
            models.Index(fields=["execution"], condition=Q(dropped__gt=0), name="log_line_dropped"),
        ]

    def __str__(self) -> str:
        return f"{self.execution_id} #{self.attempt}.{self.seq} {self.level}"


class ExecutionTotal(models.Model):
    """What executions that are gone, or were re-driven, had counted: the metrics' counters are
    these plus what the executions table holds now (executions/tallies.py). Written only where
    executions leave the table or their tally changes otherwise (pruning, deletion, a re-drive,
    a pending run moved to another pool), in that same transaction; never on the hot path.

    One row per (pool, tenant, state of the rows folded): a few per tenant and pool, not per run."""

    pool = models.CharField(max_length=64)
    # The tenant's id, not a foreign key: a deleted tenant's counts must outlive it.
    tenant_id = models.BigIntegerField()
    state = models.CharField(max_length=20)
    finished = models.BigIntegerField(default=0)  # rows folded in a terminal state
    retries = models.BigIntegerField(default=0)  # their attempts beyond the first (less re-drives')
    # Histograms of the folded finished rows: cumulative counts by upper bound (seconds, as a
    # string), how many were observed, and the sum of the observations in seconds.
    lag_buckets = models.JSONField(default=dict)
    lag_count = models.BigIntegerField(default=0)
    lag_sum = models.FloatField(default=0.0)
    duration_buckets = models.JSONField(default=dict)
    duration_count = models.BigIntegerField(default=0)
    duration_sum = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pool", "tenant_id", "state"], name="execution_total_key"),
        ]

    def __str__(self) -> str:
        return f"{self.pool}/{self.tenant_id}/{self.state}: {self.finished}"


class BackfillOrder(models.TextChoices):
    OLDEST_FIRST = "OLDEST_FIRST"
    NEWEST_FIRST = "NEWEST_FIRST"


class Reprocess(models.TextChoices):
    NONE = "NONE"  # a fire that has a run already is skipped
    FAILED = "FAILED"  # ... unless its last run ended DEAD, CANCELLED or DISCARDED: run again
    ALL = "ALL"  # every fire runs again


class FireAction(models.TextChoices):
    RUN = "RUN"  # no run of this fire exists
    RERUN = "RERUN"  # one exists and reprocess asks for another
    SKIP = "SKIP"  # one exists (or is planned by another backfill) and stays the only one


class Backfill(models.Model):
    """A job's fires in a past range [range_from, range_to), run once each (docs/backfill.md).

    Its fires are planned when it is made (BackfillFire rows, in the order they run) and
    released into PENDING executions a few at a time by the sweeper's backfill service, never
    more than `max_concurrent` of them unfinished at once."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # backfill_job_history leads with it.
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="backfills", db_index=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="backfills")
    state = models.CharField(max_length=10, choices=BackfillState.choices, default=BackfillState.RUNNING)
    range_from = models.DateTimeField()
    range_to = models.DateTimeField()
    order = models.CharField(max_length=12, choices=BackfillOrder.choices, default=BackfillOrder.OLDEST_FIRST)
    reprocess = models.CharField(max_length=6, choices=Reprocess.choices, default=Reprocess.NONE)
    max_concurrent = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(range_from__lt=models.F("range_to")), name="backfill_range_ordered"),
            models.CheckConstraint(condition=Q(max_concurrent__gte=1), name="backfill_max_concurrent_positive"),
        ]
        indexes = [
            models.Index(fields=["job", "-created_at"], name="backfill_job_history"),
            # The backfill service's only read: the backfills still releasing.
            models.Index(fields=["created_at"], condition=Q(state="RUNNING"), name="backfill_running"),
        ]

    def __str__(self) -> str:
        return f"backfill {self.id} of {self.job_id}"


class BackfillFire(models.Model):
    """One fire of a backfill's range, and what it does (run, re-run, skip); once released, the
    run it started: its execution (a plain job) or its Run (a workflow job)."""

    backfill = models.ForeignKey(Backfill, on_delete=models.CASCADE, related_name="fires", db_index=False)
    position = models.PositiveIntegerField()  # its place in the backfill's order
    scheduled_for = models.DateTimeField()
    action = models.CharField(max_length=5, choices=FireAction.choices)
    released_at = models.DateTimeField(null=True, blank=True)
    # Ids, not foreign keys: retention prunes executions and runs without asking what names them
    # (a pruned run simply no longer counts).
    execution_id = models.UUIDField(null=True, blank=True)
    run_id = models.UUIDField(null=True, blank=True)

    class Meta:
        ordering = ["backfill", "position"]
        constraints = [
            models.UniqueConstraint(fields=["backfill", "position"], name="backfill_fire_position"),
        ]
        indexes = [
            # What is left to release, in order.
            models.Index(
                fields=["backfill", "position"],
                condition=Q(released_at__isnull=True) & ~Q(action="SKIP"),
                name="backfill_fire_unreleased",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.scheduled_for.isoformat()} of backfill {self.backfill_id}"
