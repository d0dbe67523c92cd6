"""The dispatcher: admit what is due (scheduling/admission.py: by capacity and fair share),
materialise the next cron fires, publish; then sleep until the next due time or a wake-up, or
look again soon while a pool holds work back.

`run_once` is one unit of work in one transaction and returns counts; `serve` is the loop the
`run_dispatcher` command runs. Any number of dispatchers may run: their claims of a pool take
turns under its lock (PostgreSQL), those of different pools run side by side, and what spans pools
has a lock of its own (scheduling/admission.py), so limits hold whatever their number."""

import functools
import gc
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple, Self

from django.conf import settings as django_settings
from django.db import close_old_connections, transaction
from django.db.models import Q

from background.loop import StopFlag, run_forever
from background.publisher import Dispatch, Publisher
from dispatcher.buffer import BrokerBuffer
from dispatcher.wakeup import DueClock
from executions import buffering, transitions
from executions.clock import db_now
from executions.models import Execution, Origin
from executions.states import ACTIVE, ExecutionState, InvalidTransition
from jobs import cron, misfire, overlap
from jobs.models import ConcurrencyPolicy, MisfirePolicy
from jobs.recurrence import Interval
from pools.models import Role
from pools.roles import RoleBeat
from scheduling import runs
from scheduling.admission import claim
from scheduling.execution_changes import execution_cancel
from store import DueListener, Fire, Moved, store
from telemetry import tracing

logger = logging.getLogger(__name__)
S = ExecutionState


@dataclass(frozen=True)
class DispatcherSettings:
    batch: int  # executions claimed per transaction
    publish_grace: timedelta  # a claimed run not started by then is published again
    misfire_grace: timedelta  # a fire dispatched later than this counts as missed
    poll: float  # the longest sleep, and how often the next due time is asked for
    claim_spacing: float  # the least time between claims when woken by creates
    admit_poll: float  # the longest sleep while a pool holds due work back
    headroom: float  # a pool admits at least its slots * this
    max_buffer: int  # and at most this many more (dispatcher/buffer.py)

    @classmethod
    def from_django(cls) -> Self:
        s = django_settings
        return cls(
            batch=s.TICKWORK_DISPATCH_BATCH,
            publish_grace=timedelta(seconds=s.TICKWORK_PUBLISH_GRACE_SECONDS),
            misfire_grace=timedelta(seconds=s.TICKWORK_MISFIRE_GRACE_SECONDS),
            poll=s.TICKWORK_POLL_SECONDS,
            claim_spacing=s.TICKWORK_CLAIM_SPACING_SECONDS,
            admit_poll=s.TICKWORK_ADMIT_POLL_SECONDS,
            headroom=s.TICKWORK_ADMIT_HEADROOM,
            max_buffer=s.TICKWORK_ADMIT_MAX_BUFFER,
        )

    def buffer(self) -> BrokerBuffer:
        # Two looks' worth: the longest a slot may wait for the next claim while work is held back.
        return BrokerBuffer(headroom=self.headroom, most=self.max_buffer, window=2 * self.admit_poll)


class CronJob(NamedTuple):
    """What making a claimed fire's successor reads of its recurring job (CRON or INTERVAL).
    Rows, not model instances: a Job instance each was a third of a herd's claim in Python
    (1,000 a claim, profiled)."""

    id: uuid.UUID
    tenant_id: int
    schedule: str
    timezone: str
    every_sec: int | None
    start_at: datetime | None
    pool: str
    priority: int
    misfire_policy: str
    concurrency_policy: str
    catchup_window_sec: int | None


def _cron_jobs(job_ids: set) -> dict[uuid.UUID, CronJob]:
    return {row[0]: CronJob(*row) for row in store().job_rows(list(job_ids), CronJob._fields)}


@dataclass
class DispatchResult:
    claimed: int = 0
    published: int = 0
    skipped: int = 0  # fires not run because of a misfire or concurrency policy
    materialised: int = 0
    released: int = 0  # buffered fires started (concurrencyPolicy BUFFER_ONE)
    turned: int = 0  # executions over their rate limits given their turns
    held_back: set[str] = field(default_factory=set)  # pools that left due work waiting


def run_once(
    *,
    now: datetime,
    publisher: Publisher,
    limit: int | None = None,
    config: DispatcherSettings | None = None,
    buffer: BrokerBuffer | None = None,
    clock: Callable[[], datetime] | None = None,
) -> DispatchResult:
    """Admit up to `limit` due executions (by capacity and fair share, scheduling/admission.py)
    and hand them to their pools after commit. `buffer` is the dispatcher's memory of how much
    each pool needs waiting on the broker (a new one starts from the floor). `clock` (the
    database's, when serving) stamps what is queued once the claim's locks are held; else `now` does.

    In the same transaction, every claimed cron fire materialises the job's next fire (so a
    crash can lose neither), after applying the job's misfire and concurrency policies.

    With tracing on, each claimed execution's `tickwork.dispatch` span joins its trace, from the
    claim to its publish (telemetry/tracing.py).
    """
    config = config or DispatcherSettings.from_django()
    buffer = buffer or config.buffer()
    limit = limit or config.batch
    result = DispatchResult()
    began = tracing.now_ns()
    with transaction.atomic():
        # Buffered fires whose run in progress ended start now: this claim takes them.
        result.released = release_buffered(now=now)
        claimed, cron_job_ids, admission = claim(
            now=now, limit=limit, publish_grace=config.publish_grace, limit_of=buffer.limit, clock=clock
        )
        spans = tracing.dispatching(claimed, began_ns=began)
        buffer.claimed(admission.held_back)
        result.claimed, result.turned = len(claimed), admission.turned
        result.held_back = admission.held_back | admission.elsewhere
        # A workflow's steps: their runs are admitted as wholes (scheduling/runs.py).
        skipped, result.materialised = runs.admit(claimed=claimed, now=now, misfire_grace=config.misfire_grace)
        scheduled = [m for m in claimed if m.origin == Origin.SCHEDULE and m.run_id is None]
        jobs = _cron_jobs(cron_job_ids) if cron_job_ids else {}
        fires = [m for m in scheduled if m.job_id in jobs]
        skipped |= _apply_policies(fires, jobs, now, config.misfire_grace) if fires else set()
        result.skipped = len(skipped)
        spans.skipped(skipped)
        result.materialised += _materialise_next(fires, jobs, now)
        dispatches = [
            Dispatch(execution_id=str(m.id), lease_token=m.lease_token, pool=m.pool, priority=m.priority)
            for m in claimed
            if m.id not in skipped
        ]
        result.published = len(dispatches)
        if dispatches:
            transaction.on_commit(lambda: _publish(publisher, dispatches, spans))
    return result


def _publish(publisher: Publisher, dispatches: list[Dispatch], spans: tracing.Dispatching) -> None:
    with spans:  # each dispatch span ends with its publish
        publisher.publish(dispatches)


def ready() -> None:
    """What a dispatcher process does once, before its first claim: what it holds by then (Django,
    the modules, the settings: most of its objects, kept for its life) is left out of the garbage
    collector's passes (gc.freeze). A full pass walked them all, 55-110 ms at a time, during a
    claim: about once a herd of 10,000 fires, 5% of its time (profiled)."""
    gc.freeze()


def serve(*, stop: StopFlag, publisher: Publisher, config: DispatcherSettings | None = None) -> None:
    """Dispatch until `stop`: claim, then sleep until the next due time, a wake-up (a
    notification that work is due sooner) or the poll, whichever comes first."""
    config = config or DispatcherSettings.from_django()
    ready()
    listener: DueListener = store().due_listener()
    clock = DueClock(poll=config.poll)
    buffer = config.buffer()
    last = {"at": 0.0, "full": False}

    def step() -> float:
        if not last["full"]:
            # Woken by a create right after the last claim: let a few more come, so that a
            # stream of creates is claimed a few at a time rather than with a claim each.
            stop.event.wait(last["at"] + config.claim_spacing - time.monotonic())
        close_old_connections()
        last["at"], now = time.monotonic(), db_now()
        result = run_once(now=now, publisher=publisher, config=config, buffer=buffer, clock=db_now)
        last["full"] = result.claimed >= config.batch
        if result.claimed:
            logger.info("dispatched %d (claimed %d, skipped %d)", result.published, result.claimed, result.skipped)
        if last["full"]:
            return 0  # more is due right now
        # A pool that holds due work back is looked at again soon: as its slots free, the next
        # executions are chosen then, in the order of that moment. Until then new work wakes no
        # claim: it could not be admitted before a slot frees either, and a claim per create was
        # most of a busy pool's dispatching cost (work for a pool with room waits that long too).
        held_back = bool(result.held_back)
        look_again = time.monotonic() + (config.admit_poll if held_back else math.inf)
        clock.claimed(now)
        if result.materialised or result.turned:
            clock.forget()  # its own new fires, or turns it gave, are due when the database says
        if clock.stale(db_now()):
            clock.asked(store().next_due_at(after=now))
        while not stop.stopping:
            # Never below zero: a due time or a look-again that passed while claiming means now.
            seconds = max(0.0, min(clock.wait_seconds(db_now()), look_again - time.monotonic()))
            heard = listener.wait(seconds, sleep=time.sleep)
            if heard is None:
                return 0  # the due time (or the poll) came
            clock.heard(heard)
            if heard <= db_now() and not held_back:
                return 0
        return 0

    try:
        run_forever(name="dispatcher", step=step, stop=stop, beat=RoleBeat(Role.Kind.DISPATCHER, clock=db_now))
    finally:
        listener.close()


def _apply_policies(claimed: Sequence[Moved], jobs: dict, now: datetime, misfire_grace: timedelta) -> set:
    """Cancel the claimed fires that a policy says must not run; return their ids."""
    skipped: set = set()
    for m in claimed:
        job: CronJob = jobs[m.job_id]
        if m.attempt > 1 or _was_buffered(m, job):
            continue  # a retry, or a buffered fire released: judged when it was first claimed
        reason = misfire.skip_reason(
            policy=job.misfire_policy,
            scheduled_for=m.scheduled_for,
            now=now,
            grace=misfire_grace,
            window=misfire.window_of(job.catchup_window_sec),
            next_fire=functools.partial(_next_fire, job),
        )
        if reason:
            _skip(m, now, reason)
            skipped.add(m.id)
    overlap = {job_id for job_id, job in jobs.items() if job.concurrency_policy != ConcurrencyPolicy.ALLOW}
    if not overlap:
        return skipped
    claimed_ids = [m.id for m in claimed]
    # A backfill's runs are outside the schedule's overlap (docs/backfill.md): they neither hold a
    # fire back nor are replaced by one.
    active = list(
        Execution.objects.filter(job_id__in=overlap, state__in=ACTIVE)
        .exclude(pk__in=claimed_ids)
        .exclude(origin=Origin.BACKFILL)
    )
    busy = {e.job_id for e in active}
    buffering = {job_id for job_id in overlap if jobs[job_id].concurrency_policy == ConcurrencyPolicy.BUFFER_ONE}
    if buffering:
        fresh = [m for m in claimed if m.job_id in buffering and m.id not in skipped and m.attempt == 1]
        skipped |= _buffer_one(fresh, busy, now)
    for m in claimed:
        if m.id in skipped or m.job_id not in busy:
            continue
        if jobs[m.job_id].concurrency_policy == ConcurrencyPolicy.FORBID:
            _skip(m, now, "skipped: the previous run is still active (concurrencyPolicy FORBID)")
            skipped.add(m.id)
    # Replace only for a fire that will run: a missed fire skipped above replaces nothing.
    replacing = {m.job_id for m in claimed if m.id not in skipped}
    for execution in active:
        if execution.job_id in replacing and jobs[execution.job_id].concurrency_policy == ConcurrencyPolicy.REPLACE:
            try:
                execution_cancel(
                    execution=execution, now=now, reason="replaced by a newer fire (concurrencyPolicy REPLACE)"
                )
            except InvalidTransition:
                pass  # it finished since it was read: there is nothing left to replace
    return skipped


def _buffer_one(claimed: Sequence[Moved], active: set, now: datetime) -> set:
    """BUFFER_ONE for the claimed fires of its jobs (jobs/overlap.py): each job's, oldest first,
    runs, waits (BLOCKED, behind the job's run in progress) or is skipped (one already waits).
    `active` holds the jobs with a QUEUED or RUNNING execution besides these; a retry waiting for
    its backoff is a run in progress too. Returns the ids not to publish."""
    job_ids = {m.job_id for m in claimed}
    claimed_ids = [m.id for m in claimed]
    retrying = Execution.objects.filter(job_id__in=job_ids, state=S.PENDING, attempt__gt=1).exclude(pk__in=claimed_ids)
    running = set(active) | set(retrying.values_list("job_id", flat=True))
    buffered = set(
        Execution.objects.filter(job_id__in=job_ids, state=S.BLOCKED, run__isnull=True).values_list("job_id", flat=True)
    )
    held: set = set()
    for m in sorted(claimed, key=lambda m: (m.scheduled_for, str(m.id))):
        verdict = overlap.buffer_one(running=m.job_id in running, buffered=m.job_id in buffered)
        if verdict == overlap.Verdict.RUN:
            running.add(m.job_id)
        elif verdict == overlap.Verdict.BUFFER:
            if buffering.buffer(execution_id=m.id, source=S.QUEUED, now=now, reason=overlap.BUFFERED_REASON):
                buffered.add(m.job_id)
            held.add(m.id)
        else:
            _skip(m, now, overlap.SKIPPED_REASON)
            held.add(m.id)
    return held


def _was_buffered(m: Moved, job: CronJob) -> bool:
    """A BUFFER_ONE fire claimed again after it waited (its first claim took lease token 1): its
    policies were applied then, and its successor made."""
    return job.concurrency_policy == ConcurrencyPolicy.BUFFER_ONE and m.lease_token > 1


def release_buffered(*, now: datetime, limit: int = 1000) -> int:
    """Start the buffered fires (BLOCKED: a plain job's fire that waits, jobs/overlap.py) whose job
    has no run in progress any more: → PENDING, due now; and the buffered workflow runs likewise
    (scheduling/runs.py). Whatever the job's policy is now: a fire that waits starts once the run
    it waits for ended. Each dispatcher pass does it before its claim, which then takes them.
    Returns how many it started."""
    if not store().anything_blocked():
        return 0
    released = runs.release_buffered(now=now, limit=limit)
    # The (state, scheduled_for) index: BLOCKED rows are few (waiting steps and buffered fires).
    plain = dict(Execution.objects.filter(state=S.BLOCKED, run__isnull=True).values_list("id", "job_id")[:limit])
    if not plain:
        return released
    busy = set(
        Execution.objects.filter(job_id__in=set(plain.values()))
        .filter(Q(state__in=ACTIVE) | Q(state=S.PENDING, attempt__gt=1))
        .values_list("job_id", flat=True)
    )
    for execution_id, job_id in plain.items():
        if overlap.releases(running=job_id in busy, buffered=True):
            released += buffering.unbuffer(execution_id=execution_id, now=now, reason=RELEASED_REASON)
    return released


RELEASED_REASON = "released: the run it waited for ended (concurrencyPolicy BUFFER_ONE)"


def _skip(m: Moved, now: datetime, reason: str) -> None:
    if not transitions.skip(execution=m, now=now, reason=reason):
        # Not possible while this transaction holds its pool's claim lock; said, should it ever happen.
        logger.warning("fire %s was claimed but could not be skipped: it moved meanwhile", m.id)


def _materialise_next(claimed: Sequence[Moved], jobs: dict, now: datetime) -> int:
    """Create the fire after each claimed one, set-based: the next times computed once per
    distinct (schedule, timezone, fire) (a herd of jobs on one schedule is one computation), the
    executions and their events in one statement, the jobs' next_fire_at in one. H is resolved
    with the job's id (jobs/cron.py). RUN_ALL walks
    every missed fire one claim at a time (a backfill); RUN_ONCE and SKIP jump to the first fire
    still ahead. All of it is in the claim's transaction: a dispatcher that dies anywhere in it
    leaves the claimed fires PENDING and makes no next fire, so nothing is lost or doubled."""
    memo: dict[tuple[str, str, datetime], datetime] = {}

    def after(job: CronJob, moment: datetime) -> datetime:
        return _next_fire(job, moment, memo)

    fires: dict[tuple, Fire] = {}
    next_fires: dict = {}
    for m in claimed:
        job: CronJob = jobs[m.job_id]
        if m.attempt > 1 or _was_buffered(m, job):
            continue  # a retry of an old fire, or a buffered one: its successor was made when it was first claimed
        fire = after(job, m.scheduled_for)
        if fire <= now and job.misfire_policy != MisfirePolicy.RUN_ALL:
            fire = after(job, now)
        trace = tracing.fire_traceparent(job_id=job.id, scheduled_for=fire, previous=m.traceparent)
        fires[(job.id, fire)] = Fire(job.id, job.tenant_id, job.pool, job.priority, fire, trace)
        next_fires[job.id] = max(fire, next_fires.get(job.id, fire))
    created = transitions.create_fires(fires=list(fires.values()), now=now)
    transitions.advance_jobs(next_fires=next_fires)
    return created


def _next_fire(job: CronJob, moment: datetime, memo: dict | None = None) -> datetime:
    """The job's first fire after `moment`. H is resolved with the job's id (jobs/cron.py)."""
    if job.every_sec is not None and job.start_at is not None:  # INTERVAL: arithmetic, nothing to share
        return Interval(every=timedelta(seconds=job.every_sec), start=job.start_at).next_fire(moment)
    # By the schedule as resolved for the job (H is hashed from its id): jobs whose H lands on
    # the same minute share the computation too (`memo`, one claim's).
    key = (cron.resolve(job.schedule, str(job.id)), job.timezone, moment)
    if memo is None:
        return cron.next_fire(*key)
    if key not in memo:
        memo[key] = cron.next_fire(*key)
    return memo[key]
