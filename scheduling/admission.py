"""Admission: which due executions go to the broker now, and why the others wait.

Due is not admitted. A broker queue is first come, first served, so the order of work is decided
here, before publishing, while it is still ours to decide. Per pool, what is admitted (QUEUED +
RUNNING) is kept at the limit the dispatcher sets from the pool's live worker slots (the worker
registry, pools/registry.py) plus a small buffer, and the rest stays PENDING. The choice:

1. Priority first: HIGH, then NORMAL, then LOW, strictly.
2. Within a level, start-time fair queuing between tenants (pools/fair.py): starts in proportion
   to each tenant's `weight`, and a tenant with one due execution is never behind another
   tenant's backlog.
3. Within a tenant, earliest due first.
4. Never past a tenant's `max_concurrent_executions` (its QUEUED + RUNNING, in every pool).
5. Never faster than a named rate limit: of what 1-4 chose, an execution over its limit is given
   its turn instead (scheduling/rate_limiting.py), and the pool is walked again past it.

Nothing of a paused pool (scheduling/pool_pauses.py) is admitted: the claim's snapshot names
the paused pools, and their due work is not even read. It is not "held back" either: a paused
pool is not looked at again soon, its resume wakes the dispatchers.

When everything due in a pool fits, it is all admitted in due order (one index walk); the fair
order is worked out only when the pool is contended. The claim (`claim`) is one transaction that
takes each pool's claim lock in turn (a pool another claim holds is left to it: claims of different
pools run side by side, so that dispatchers add throughput), reads what the pool has admitted, the
tenants' standing and their due work, and ends with the tags it moved on. What spans pools (a
tenant's concurrency limit, a named rate limit) is decided under one more lock, taken only by a
claim that admits such work (`_AcrossPools`): limits hold with any number of dispatchers.
"""

import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from executions import transitions
from jobs.models import Priority
from pools import registry
from pools.fair import Contender, FairShare, Share
from scheduling.rate_limiting import WALKS, Limiter
from store import DueRow, Moved, store

# How many times a contended claim offers the starts that tenants with fewer due executions
# than their share left over (each time to the others, in fair order).
ROUNDS = 3


@dataclass(frozen=True)
class Load:
    """A pool as the claim found it."""

    workers: int
    slots: int
    busy: int
    queued: int
    running: int
    rate: float = 0.0  # runs its workers take per second, as they last reported

    @property
    def admitted(self) -> int:
        return self.queued + self.running


# The dispatcher's say: how much of a pool may be admitted at once, given its load.
LimitOf = Callable[[str, Load], int]


@dataclass
class Admission:
    chosen: list[DueRow] = field(default_factory=list)  # in the order to publish
    held_back: set[str] = field(default_factory=set)  # pools that left due work waiting
    elsewhere: set[str] = field(default_factory=set)  # pools another claim held: looked at again soon
    turned: int = 0  # executions over their rate limits given their turns (scheduling/rate_limiting.py)


def choose(*, now: datetime, limit: int, limit_of: LimitOf) -> Admission:
    """The due executions to admit now, at most `limit`. Call inside the claim's transaction:
    it takes each pool's claim lock, and the lock across pools when it needs it, which that
    transaction holds until it ends."""
    s = store()
    if not s.anything_due(now=now):
        return Admission()
    snapshot = s.snapshot(live_since=now - registry.offline_after(), admitted=False)
    capacity = registry.totals(snapshot.workers)
    # What each pool has admitted, as the snapshot read it (exact once the pool's lock is held:
    # `claim_pool`). What each capped tenant has, in every pool: read under the lock across pools
    # (`_AcrossPools`), which the claim takes before it admits any of theirs; then what it admits.
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for pool, _, state, count in snapshot.admitted:
        counts[pool][0 if state == "QUEUED" else 1] += count
    tenant_load: Counter[int] = Counter()
    caps = snapshot.limits
    across = _AcrossPools(caps, tenant_load)
    admission = Admission()
    limiter = Limiter(now=now)
    if limiter.defined():
        across.hold()  # a named limit's clock is shared by every pool
    # Only the pools with anything due are locked and walked: one statement finds them.
    for pool in sorted(s.pools_with_due(list(capacity.keys() - snapshot.paused), now=now)):
        if len(admission.chosen) >= limit:
            break  # full: the dispatcher claims again at once, and this pool then
        queued, running = counts[pool]
        admitted = s.claim_pool(pool, seen=snapshot.stamps.get(pool, 0), counts=(queued, running))
        if admitted is None:
            admission.elsewhere.add(pool)  # another claim admits its work now
            continue
        c = capacity[pool]
        load = Load(c.workers, c.slots, c.busy, *admitted, c.rate)
        room = limit_of(pool, load) - load.admitted
        # Walked again while the rate limits give turns instead of admitting (scheduling/rate_limiting.py);
        # what a walk chose is still PENDING until the claim queues it, and is read past.
        picked: dict[int, set] = defaultdict(set)
        turns = limiter.turns_due(
            pool, room=min(room, limit - len(admission.chosen)), tenant_load=tenant_load, caps=caps
        )
        admission.chosen += turns
        room -= len(turns)
        for row in turns:
            picked[row[2]].add(row[0])
        for _ in range(WALKS):
            free = min(room, limit - len(admission.chosen))
            before = sum(len(ids) for ids in picked.values())
            length = max(free, 0) + 1 + before
            walked = s.due_in_pool(pool=pool, now=now, limit=length)
            rows = [row for row in walked if row[0] not in picked[row[2]]]
            if not rows:
                break
            if len(rows) <= free and across.within_limits(rows):
                taken = rows  # uncontended: everything due fits
            else:
                admission.held_back.add(pool)
                complete = _complete_levels(walked, length)
                taken = _fair(pool, free, now, across, walk=rows, picked=picked, complete=complete) if free > 0 else []
            taken, turned = limiter.admit(taken)
            admission.chosen += taken
            tenant_load.update(row[2] for row in taken)
            for row in taken:
                picked[row[2]].add(row[0])
            room -= len(taken)
            if not turned:
                break
            admission.held_back.add(pool)  # its turns come soon: looked at again then
    limiter.save()
    admission.turned = limiter.turned
    return admission


class _AcrossPools:
    """What spans pools: a tenant's `max_concurrent_executions` counts what it has admitted in
    every pool, and a named rate limit's clock is shared by all. Claims of different pools run side
    by side, each under its pool's lock; one that would admit a capped tenant's work (or count
    against a limit) first takes the lock across pools, and reads the capped tenants' loads again
    under it, so that two claims never both admit up to the same tenant's limit. Until then, it
    has chosen nothing of a capped tenant's."""

    def __init__(self, caps: dict[int, int], tenant_load: Counter[int]) -> None:
        self.caps, self.tenant_load = caps, tenant_load
        self.held = False

    def hold(self) -> None:
        if self.held:
            return
        loads = store().hold_tenants(list(self.caps))
        for tenant_id in self.caps:
            self.tenant_load[tenant_id] = loads.get(tenant_id, 0)
        self.held = True

    def concern(self, tenant_ids: Iterable[int]) -> None:
        """Hold the lock across pools if any of `tenant_ids` is capped."""
        if not self.held and any(t in self.caps for t in tenant_ids):
            self.hold()

    def within_limits(self, rows: list[DueRow]) -> bool:
        wanted = Counter(row[2] for row in rows)
        self.concern(wanted)
        return all(self.tenant_load[t] + n <= self.caps[t] for t, n in wanted.items() if t in self.caps)


class Claimed(NamedTuple):
    executions: list[Moved]  # in the order to publish
    cron_job_ids: set[uuid.UUID]  # the cron jobs among theirs
    admission: Admission  # the pools as the claim found them, and which left due work waiting


def claim(
    *,
    now: datetime,
    limit: int,
    publish_grace: timedelta,
    limit_of: LimitOf,
    clock: Callable[[], datetime] | None = None,
) -> Claimed:
    """The dispatcher's claim: PENDING → QUEUED for the due executions `choose` admits (at most
    `limit`), through the named transition `queue_many`, in the order to publish. Call inside the
    transaction that publishes after commit: it holds the pools' claim locks and the rows' locks."""
    admission = choose(now=now, limit=limit, limit_of=limit_of)
    if not admission.chosen:
        return Claimed([], set(), admission)
    order = {row[0]: position for position, row in enumerate(admission.chosen)}
    # Queued as of `clock()` once the claim's locks are held: `now` was read before the claim waited
    # for them, and a run admitted for a slot that freed meanwhile would say it was queued before
    # that slot freed. Without a clock (a test's injected time), as of `now`.
    stamp = max(now, clock()) if clock is not None else now
    moved = transitions.queue_many(list(order), now=stamp, publish_grace=publish_grace)
    moved.sort(key=lambda m: order[m.id])
    cron = {row[0] for row in admission.chosen if row[1]}
    return Claimed(moved, {m.job_id for m in moved if m.id in cron}, admission)


def _complete_levels(walked: list[DueRow], length: int) -> set[int]:
    """The priority levels whose due work a pool's walk (`walked`, stopped at `length` rows) read
    to its end. The walk reads the levels in turn, each to its end or to `length` rows: a level
    is whole in it when the walk holds fewer than `length` rows up to and including it."""
    upto = Counter(row[3] for row in walked)
    complete, count = set(), 0
    for level in sorted(Priority.values):
        count += upto[level]
        if count < length:
            complete.add(level)
    return complete


def _fair(
    pool: str,
    free: int,
    now: datetime,
    across: _AcrossPools,
    *,
    walk: list[DueRow],
    picked: dict[int, set] | None = None,
    complete: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[DueRow]:
    """Fill `free` starts of a contended pool in fair order (see the module's docstring). `walk`
    is what the pool's walk in due order read (more than `free`): the tenants' executions are
    taken from it where it holds enough of them, or all of them, at the levels it read to their
    end (`complete`). `picked`: each tenant's executions this claim chose already, still
    PENDING, read past."""
    s = store()
    virtual_time, rows = s.shares(pool=pool)
    across.concern(t for t, _, cap, _ in rows if cap is not None)
    tenant_load = across.tenant_load
    shares = {
        t: Share(weight=w, finish_tag=tag, allowance=free if cap is None else cap - tenant_load[t])
        for t, w, cap, tag in rows
    }
    fair = FairShare(virtual_time, shares)
    chosen: list[DueRow] = []
    moved: set[int] = set()
    # Level by level, from the highest the walk found due: a lower level's heads are read
    # only when the levels above leave starts free.
    for priority in range(min(row[3] for row in walk), max(Priority.values) + 1):
        if free <= 0:
            break
        walked: dict[int, list[DueRow]] = defaultdict(list)
        for row in walk:
            if row[3] == priority:
                walked[row[2]].append(row)
        eligible = [t for t, share in shares.items() if share.allowance > 0]
        heads = s.due_heads(pool=pool, priority=priority, tenant_ids=eligible, now=now)
        contenders = {tenant_id: Contender(tenant_id, earliest) for tenant_id, earliest in heads}
        # The ids chosen of each tenant at this level (and by an earlier walk of the claim).
        given: dict[int, set] = defaultdict(set, {t: set(ids) for t, ids in (picked or {}).items()})
        for _ in range(ROUNDS):
            if free <= 0 or not contenders:
                break
            order = fair.allocate(free, contenders.values())
            if not order:
                break
            quotas = Counter(order)
            # Still PENDING, a tenant's rows chosen in an earlier round come first again: read past them.
            wanted = {t: len(given[t]) + n for t, n in quotas.items()}
            due = _tenants_due(pool, priority, wanted, walked, now, whole=priority in complete)
            got = {t: [row for row in due.get(t, []) if row[0] not in given[t]][: quotas[t]] for t in quotas}
            for t, rows_of_t in got.items():
                given[t].update(row[0] for row in rows_of_t)
            taken = {t: len(got[t]) for t in quotas}
            # Published in the fair order: the broker keeps it among what this claim admits.
            for t in order:
                if got[t]:
                    chosen.append(got[t].pop(0))
            fair.record(taken)
            moved.update(t for t, n in taken.items() if n)
            free -= sum(taken.values())
            for t, n in taken.items():
                if n < quotas[t] or shares[t].allowance <= 0:
                    del contenders[t]  # it has no more due here, or reached its limit
    if moved:
        s.save_shares(pool=pool, finish_tags={t: shares[t].finish_tag for t in moved}, virtual_time=fair.virtual_time)
    return chosen


def _tenants_due(
    pool: str,
    priority: int,
    wanted: dict[int, int],
    walked: dict[int, list[DueRow]],
    now: datetime,
    *,
    whole: bool = False,
) -> dict[int, list[DueRow]]:
    """Each tenant's first `wanted[t]` executions due at `priority`, in due order (fewer if it has
    fewer). The pool's walk read a prefix of the level's due order, so a tenant's rows in it are
    the first of its own: where it holds enough, they are taken from it, and the database is asked
    for the others only. In a herd the walk holds most of what a claim takes, and a single tenant's
    backlog all of it: reading it all again was a tenth of such a claim. `whole`: the walk read
    the level to its end, so what it holds of a tenant is all the tenant has due there (a backlog
    whose HIGH work is fewer than a claim: asking the database for more found nothing more)."""
    got = {t: walked.get(t, [])[:n] for t, n in wanted.items() if whole or len(walked.get(t, ())) >= n}
    rest = {t: n for t, n in wanted.items() if t not in got}
    if rest:
        for row in store().due_of_tenants(pool=pool, priority=priority, quotas=rest, now=now):
            got.setdefault(row[2], []).append(row)
    return got
