import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Q

from jobs.states import JobState, StoredJobState


class JobType(models.TextChoices):
    ONCE = "ONCE"
    DELAYED = "DELAYED"
    CRON = "CRON"
    INTERVAL = "INTERVAL"  # every `every_sec` seconds from `start_at` (jobs/recurrence.py)
    EVENT = "EVENT"  # fires once per matching event (events/), never by time


# The types that run once and are COMPLETED when that run ends; the others fire again.
ONE_OFF_TYPES = (JobType.ONCE, JobType.DELAYED)
# The types that fire by a schedule (jobs/recurrence.py), with misfire and overlap policies.
RECURRING_TYPES = (JobType.CRON, JobType.INTERVAL)


class Priority(models.IntegerChoices):
    # Stored as a number so the claim can ORDER BY it; lower runs first.
    HIGH = 0, "HIGH"
    NORMAL = 1, "NORMAL"
    LOW = 2, "LOW"


class Backoff(models.TextChoices):
    EXPONENTIAL = "EXPONENTIAL"
    FIXED = "FIXED"


class MisfirePolicy(models.TextChoices):
    RUN_ONCE = "RUN_ONCE"  # one catch-up run for all fires missed while nothing dispatched
    RUN_ALL = "RUN_ALL"  # one run per missed fire (a backfill)
    SKIP = "SKIP"  # missed fires are dropped; the next future fire runs


class ConcurrencyPolicy(models.TextChoices):
    ALLOW = "ALLOW"
    FORBID = "FORBID"  # a fire is skipped while an earlier run of the job is still active
    REPLACE = "REPLACE"  # an active run is cancelled and the new fire runs
    # While a run is in progress, one fire waits (BLOCKED) and starts when that run ends; a fire
    # arriving while one waits is skipped (jobs/overlap.py).
    BUFFER_ONE = "BUFFER_ONE"


class Job(models.Model):
    """What to run, when, and how to retry it. Each run is an Execution."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: the (tenant, …) indexes below lead with it. Every job write pays per index.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="jobs", db_index=False)
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=8, choices=JobType.choices)
    # ONCE: the requested instant; DELAYED: creation time + delay_sec. Null for CRON.
    run_at = models.DateTimeField(null=True, blank=True)
    delay_sec = models.PositiveIntegerField(null=True, blank=True)
    schedule = models.CharField(max_length=200, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    # INTERVAL: the period, and the first fire (the anchor of every later one). A CRON job may
    # have a start_at too: no fire before it.
    every_sec = models.PositiveIntegerField(null=True, blank=True)
    start_at = models.DateTimeField(null=True, blank=True)
    # Empty for a workflow job: each of its steps names its own target.
    pool = models.CharField(max_length=64, blank=True)
    handler = models.CharField(max_length=100, blank=True)
    # A named rate limit its runs are held to (pools/rate_limits.py), over its handler's own.
    # Null when the target names none, as an optional field of the definition is (jobs/fields.py).
    rate_limit = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    payload = models.JSONField(default=dict, blank=True)
    max_attempts = models.PositiveIntegerField(default=3)
    backoff = models.CharField(max_length=12, choices=Backoff.choices, default=Backoff.EXPONENTIAL)
    initial_delay_ms = models.PositiveIntegerField(default=1000)
    max_delay_ms = models.PositiveIntegerField(default=60_000)
    jitter = models.BooleanField(default=True)
    timeout_sec = models.PositiveIntegerField(default=3600)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    misfire_policy = models.CharField(max_length=8, choices=MisfirePolicy.choices, default=MisfirePolicy.RUN_ONCE)
    concurrency_policy = models.CharField(
        max_length=10, choices=ConcurrencyPolicy.choices, default=ConcurrencyPolicy.ALLOW
    )
    # CRON and INTERVAL jobs: a missed fire runs only if it is at most this many seconds old when
    # claimed; older ones are skipped (jobs/misfire.py). Null: no window, every policy as it was.
    catchup_window_sec = models.PositiveIntegerField(null=True, blank=True)
    # A workflow job's steps (jobs/workflow.py: validated, in model terms), instead of a target:
    # each fire starts a run of them (scheduling/runs.py). Null for a plain job.
    workflow = models.JSONField(null=True, blank=True)
    # An EVENT job: the event's name it fires on, and equality on the payload's top-level keys.
    # db_default too: rows inserted by SQL of their own (the benchmark, data loads) need not name it.
    event_name = models.CharField(max_length=200, blank=True, default="", db_default="")
    event_filter = models.JSONField(null=True, blank=True)
    # An EVENT job's debounce (events/debounce.py): the events that match within this many seconds
    # of each other fold into one run, started once they stop (or `debounce_max_sec` after the
    # first). None: each event starts a run of its own.
    debounce_sec = models.PositiveIntegerField(null=True, blank=True)
    debounce_max_sec = models.PositiveIntegerField(null=True, blank=True)
    # CRON and INTERVAL jobs: paused by the system after this many consecutive fires ended DEAD
    # (README, "Pausing after failed fires"). Null: never.
    pause_after_failures = models.PositiveIntegerField(null=True, blank=True)
    # As stored: a one-off job's COMPLETED is read from its executions (`standing`).
    state = models.CharField(max_length=10, choices=StoredJobState.choices, default=StoredJobState.ACTIVE)
    # The fires that ended DEAD since the last that succeeded (or the last resume): counted by the
    # store in the transaction of the move to DEAD (store.count_failed_fire), only while
    # pause_after_failures is set. db_default: rows inserted by SQL of their own need not name it.
    failed_fires = models.PositiveIntegerField(default=0, db_default=0)
    # Why the system paused it ("paused after 3 consecutive failed fires"); empty when it is not
    # paused, or was paused by someone. Cleared by resume.
    paused_reason = models.CharField(max_length=200, blank=True, default="", db_default="")
    # The earliest scheduled fire not yet dispatched; null when there is none.
    next_fire_at = models.DateTimeField(null=True, blank=True)
    # Null, not "", when absent: the unique index must ignore jobs created without a key.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # SHA-256 of the canonical request body, to tell a replay from a conflicting reuse of the key;
    # empty without a key (nothing to tell).
    request_fingerprint = models.CharField(max_length=64, blank=True)
    # Who created the job, as the request knew it: the author of its version 1, which this row
    # holds until the definition first changes (jobs.versions).
    created_by = models.CharField(max_length=200, blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="job_idempotency_key_unique",
            ),
            models.CheckConstraint(
                condition=~Q(type__in=["ONCE", "DELAYED"]) | Q(run_at__isnull=False),
                name="job_one_off_has_run_at",
            ),
            models.CheckConstraint(
                condition=~Q(type="DELAYED") | Q(delay_sec__isnull=False), name="job_delayed_has_delay"
            ),
            models.CheckConstraint(condition=~Q(type="CRON") | ~Q(schedule=""), name="job_cron_has_schedule"),
            models.CheckConstraint(condition=~Q(type="EVENT") | ~Q(event_name=""), name="job_event_has_name"),
            models.CheckConstraint(
                condition=~Q(type="INTERVAL") | Q(every_sec__gte=1, start_at__isnull=False),
                name="job_interval_has_period",
            ),
            models.CheckConstraint(condition=Q(type__in=JobType.values), name="job_type_valid"),
            models.CheckConstraint(condition=Q(state__in=StoredJobState.values), name="job_state_valid"),
            models.CheckConstraint(condition=Q(max_attempts__gte=1), name="job_max_attempts_positive"),
            models.CheckConstraint(condition=Q(timeout_sec__gte=1), name="job_timeout_positive"),
            models.CheckConstraint(
                condition=Q(catchup_window_sec__isnull=True)
                | Q(catchup_window_sec__gte=1, type__in=["CRON", "INTERVAL"]),
                name="job_catchup_window_recurring",
            ),
            models.CheckConstraint(
                condition=Q(pause_after_failures__isnull=True)
                | Q(pause_after_failures__gte=1, type__in=["CRON", "INTERVAL"]),
                name="job_pause_after_failures_recurring",
            ),
            models.CheckConstraint(
                condition=Q(max_delay_ms__gte=models.F("initial_delay_ms")), name="job_backoff_bounds"
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="job_tenant_created"),
            # With the type: a tenant's live jobs are counted by ranges that leave its ended
            # one-offs out (their rows stay ACTIVE: executions.standing.live_count), index only.
            models.Index(fields=["tenant", "state", "type"], name="job_tenant_state"),
            # An event's matching: the tenant's event jobs on that name (events/services.py).
            models.Index(fields=["tenant", "event_name"], condition=Q(type="EVENT"), name="job_event_name"),
            # The sweeper's look for cancelled jobs to prune (scheduling.pruning.jobs_prune); the
            # one-offs, whose COMPLETED is read, are found by their executions as they are pruned.
            models.Index(fields=["updated_at"], condition=Q(state="CANCELLED"), name="job_ended"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def is_one_off(self) -> bool:
        return self.type in ONE_OFF_TYPES

    @property
    def is_recurring(self) -> bool:
        return self.type in RECURRING_TYPES

    # What a reader sees of the job's state and times: as stored, but for a one-off ACTIVE job none
    # of whose executions can run any more, which reads COMPLETED, with no next fire, changed when
    # its last run ended. That is read from its executions, not stored (jobs/states.py):
    # executions.standing.attach reads it for a page of jobs in one statement and sets `ended_at`
    # (None: not ended that way); a job read alone asks for its own (`_ended_reader`).
    ended_at: datetime | None  # set by executions.standing.attach, or on first read

    @property
    def standing(self) -> str:
        return JobState.COMPLETED if self._ended() else self.state

    @property
    def shown_next_fire_at(self) -> datetime | None:
        return None if self._ended() else self.next_fire_at

    @property
    def shown_updated_at(self) -> datetime:
        ended = self._ended()
        return max(ended, self.updated_at) if ended else self.updated_at

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__.pop("ended_at", None)  # read again with the row
        super().refresh_from_db(*args, **kwargs)

    def _ended(self) -> datetime | None:
        if self.state != StoredJobState.ACTIVE or self.type not in ONE_OFF_TYPES:
            return None
        if "ended_at" not in self.__dict__:
            self.ended_at = _ended_reader(self)
        return self.ended_at


def _no_reader(job: Job) -> datetime | None:
    raise LookupError("no reader of a one-off job's end is installed (executions.apps)")


# Set by the executions app (executions/standing.py), which knows what can still run.
_ended_reader: Callable[[Job], datetime | None] = _no_reader


def read_ended_with(reader: Callable[[Job], datetime | None]) -> None:
    global _ended_reader
    _ended_reader = reader


class JobVersion(models.Model):
    """One version of a job's definition: what it was after a change, who made the change, when,
    and which fields it changed against the version before. Written by jobs.versions only.

    Version 1 is the definition the job was created with (no changes); each change of the
    definition adds the next number. A job's versions are stored from its first change on: until
    then its version 1 is its own row (jobs.versions). The numbers of a job are unique in the
    database, so two writers racing for the same number cannot both succeed."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="versions", db_index=False)
    number = models.PositiveIntegerField()
    # The definition in the model's names (jobs.fields.definition_of): nested target and
    # retry_policy, priority by name; the API shows it in its own (web/api/job_versions.py). Never
    # state, next fire or idempotency key.
    definition = models.JSONField()
    # [{"field": "schedule", "from": "0 * * * *", "to": "*/5 * * * *"}, …] against number - 1; a
    # group's field by its dotted path ("retry_policy.max_attempts").
    changes = models.JSONField(default=list, blank=True)
    # Who made the change, as the request knew it: "token deploy (tw_ab12cd) of acme", "user ada",
    # "dashboard ada", "migration".
    actor = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["job", "-number"]
        constraints = [
            # Also the index the history reads by: WHERE job_id = … ORDER BY number DESC.
            models.UniqueConstraint(fields=["job", "number"], name="job_version_number_unique"),
            models.CheckConstraint(condition=Q(number__gte=1), name="job_version_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} v{self.number}"
