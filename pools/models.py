"""The pools' side of admission: who can run work (the worker registry) and whose turn it is
(each tenant's place in each pool's fair order)."""

from django.db import models


class Worker(models.Model):
    """One worker process group (a `celery worker` and its pool processes) as it last reported
    itself. Written only by that worker's main process: on start, every few seconds, and on a
    clean stop. Capacity, utilisation and liveness are read from here."""

    hostname = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    pools = models.JSONField(default=list)  # the pools whose queues it consumes
    # Its processes' pids since it started (the main one's and its pool's): executions name the
    # process that ran them ("host:pid"), so this is how the dashboard counts a worker's runs.
    pids = models.JSONField(default=list)
    slots = models.PositiveIntegerField()  # runs it can hold at once (its concurrency)
    busy = models.PositiveIntegerField(default=0)  # runs it holds, as of last_seen_at
    processed = models.PositiveBigIntegerField(default=0)  # runs it has taken since it started
    rate = models.FloatField(default=0.0)  # runs it took per second between its last two reports
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)  # a clean stop: offline at once

    class Meta:
        ordering = ["hostname", "pid"]
        constraints = [
            models.UniqueConstraint(fields=["hostname", "pid", "started_at"], name="worker_one_row_per_start"),
        ]
        indexes = [models.Index(fields=["last_seen_at"], name="worker_last_seen")]

    def __str__(self) -> str:
        return f"{self.hostname}:{self.pid}"


class PoolClock(models.Model):
    """A pool's virtual time in start-time fair queuing: the start tag of the last admitted
    execution. A tenant that comes back after being idle starts from here, not from its own
    old tag, so it cannot hoard the turns it did not use."""

    pool = models.CharField(max_length=64, unique=True)
    virtual_time = models.FloatField(default=0.0)
    # The claims that took the pool's lock, each counting itself as it takes it: a claim that
    # finds one more than its snapshot said knows that no other claim of the pool committed in
    # between, so what the snapshot read the pool had admitted still holds (scheduling/admission.py).
    claims = models.BigIntegerField(default=0, db_default=0)

    def __str__(self) -> str:
        return f"{self.pool}@{self.virtual_time:g}"


class TenantShare(models.Model):
    """A tenant's finish tag in a pool: where its next start stands in the pool's fair order.
    Each start moves it on by 1 / weight, so over any contended stretch starts follow weights."""

    pool = models.CharField(max_length=64)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="shares", db_index=False)
    finish_tag = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "pool"], name="tenant_share_one_per_pool")]

    def __str__(self) -> str:
        return f"{self.tenant_id}@{self.pool}:{self.finish_tag:g}"


class Role(models.Model):
    """One dispatcher, sweeper or alerter process as it last reported itself (pools/roles.py): when it
    last finished a unit of work, and its last failure. Health and the dashboard read it: a role
    that is up but failing every unit of work stops being seen, which is the truth."""

    class Kind(models.TextChoices):
        DISPATCHER = "dispatcher"
        SWEEPER = "sweeper"
        ALERTER = "alerter"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    hostname = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()  # its last unit of work done (or its start)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["kind", "hostname", "pid"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "hostname", "pid", "started_at"], name="role_one_row_per_start"),
        ]
        indexes = [models.Index(fields=["kind", "-last_seen_at"], name="role_kind_seen")]

    def __str__(self) -> str:
        return f"{self.kind} {self.hostname}:{self.pid}"


class PoolPause(models.Model):
    """A pool an operator has paused: nothing of it is admitted until the row is gone (resume);
    what is QUEUED or RUNNING finishes. The claim reads the set of them with its snapshot, in the
    same round trip (store/admission.py), so a pause costs no query of its own."""

    pool = models.CharField(max_length=64, unique=True)
    paused_at = models.DateTimeField()
    paused_by = models.CharField(max_length=200)  # "dashboard ada", "api staff-user"
    reason = models.CharField(max_length=500, blank=True)

    def __str__(self) -> str:
        return f"{self.pool} paused by {self.paused_by}"


class PoolSample(models.Model):
    """One minute of one pool, for one tenant or (tenant null) for every tenant together, as the
    sweeper saw it when the minute ended (maintenance/services/pool_history.py): the queue then (due
    backlog, queued, running) and what happened in the minute (finished by outcome, started and
    their start lag). The dashboard's charts of 24 hours and 7 days read these, not the
    executions: staff read the pools' totals (a row per pool per minute, however many tenants),
    a member its tenants' rows (only those with anything to say are written). Pruned after 8 days."""

    at = models.DateTimeField()  # the minute's start, UTC
    pool = models.CharField(max_length=64)
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False, null=True, blank=True
    )
    due = models.PositiveIntegerField(default=0)  # the due backlog at the minute's end (readmodels/backlog.py)
    queued = models.PositiveIntegerField(default=0)  # admitted, on the broker, at the minute's end
    running = models.PositiveIntegerField(default=0)  # at the minute's end
    succeeded = models.PositiveIntegerField(default=0)  # finished in the minute
    failed = models.PositiveIntegerField(default=0)  # went DEAD in the minute
    cancelled = models.PositiveIntegerField(default=0)  # any other end in the minute
    started = models.PositiveIntegerField(default=0)  # started in the minute
    lag_p50_ms = models.FloatField(null=True, blank=True)  # of those starts
    lag_p99_ms = models.FloatField(null=True, blank=True)

    class Meta:
        # One row per minute and pool, per tenant and in total: a second sweeper's rows are no-ops.
        # The pools' totals are read by their index's `at` range, a tenant's by (tenant, at); the
        # pruning by `at` alone.
        constraints = [
            models.UniqueConstraint(
                fields=["at", "pool"], condition=models.Q(tenant__isnull=True), name="pool_sample_total_per_minute"
            ),
            models.UniqueConstraint(
                fields=["tenant", "at", "pool"],
                condition=models.Q(tenant__isnull=False),
                name="pool_sample_tenant_per_minute",
            ),
        ]
        indexes = [models.Index(fields=["at"], name="pool_sample_at")]

    def __str__(self) -> str:
        return f"{self.pool}/{self.tenant_id or 'all'}@{self.at:%Y-%m-%d %H:%M}"


class RateLimit(models.Model):
    """A named rate limit (`manage.py rate_limit set`, the admin): at most `per_second` starts a
    second, `burst` of them at once, across every dispatcher and worker, for the executions of the
    handlers that declare it and the jobs whose target names it (pools/rate_limits.py).

    Two clocks of the same bucket, as GCRA keeps one (its theoretical arrival time, in seconds
    since the epoch): the claim's, which paces admission and gives the executions over the limit
    their turns, and the workers' starts', which holds every start to the limit exactly."""

    name = models.CharField(max_length=64, unique=True)
    per_second = models.FloatField()
    burst = models.PositiveIntegerField(default=1)
    admit_tat = models.FloatField(default=0.0)
    start_tat = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(per_second__gt=0), name="rate_limit_rate_positive"),
            models.CheckConstraint(condition=models.Q(burst__gte=1), name="rate_limit_burst_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.per_second:g}/s, burst {self.burst}"
