"""The misfire policies as pure rules: what happens to a cron job's fires that were due while
nothing dispatched them (the scheduler was down, or the job was paused). No database.

The dispatcher applies them one claimed fire at a time (dispatcher/dispatcher.py): `skips` decides
whether a claimed fire is cancelled instead of run, and after each claimed fire it materialises
the next one, jumping past `now` unless the policy is RUN_ALL. `catch_up` is the closed form of
the dispatcher claiming at one `now` until nothing is due, for a job whose pending fire is
`pending`: what a resume would run and skip (POST /v1/jobs/{id}/resume?dryRun=true).
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobs.models import MisfirePolicy


def skips(*, policy: str, scheduled_for: datetime, now: datetime, grace: timedelta) -> bool:
    """Whether a cron fire claimed at `now` is cancelled rather than run: under SKIP, a fire more
    than `grace` late is a missed one. RUN_ONCE and RUN_ALL run every fire they claim."""
    return policy == MisfirePolicy.SKIP and scheduled_for < now - grace


def backfills(policy: str) -> bool:
    """Whether the fires between a late fire and now are each materialised and run (RUN_ALL), or
    the next fire materialised is the first one after now (RUN_ONCE, SKIP)."""
    return policy == MisfirePolicy.RUN_ALL


@dataclass(frozen=True)
class CatchUp:
    runs: list[datetime]  # the fires that would run, in order: the first `limit` of them
    skipped: list[datetime]  # the fires due by now that would not run: the first `limit`
    run_count: int
    skip_count: int
    capped: bool  # more fires were due than were counted: the counts are lower bounds
    next_fire: datetime | None  # the fire left pending once caught up (after now)


def catch_up(
    *,
    policy: str,
    pending: datetime,
    now: datetime,
    grace: timedelta,
    fires_between: Callable[[datetime, datetime, int], list[datetime]],
    next_fire: Callable[[datetime], datetime],
    limit: int = 100,
    count_limit: int = 100_000,
) -> CatchUp:
    """What the dispatcher, claiming at `now` until nothing is due, does with a cron job whose
    pending fire is `pending`. `fires_between(start, end, n)` gives the schedule's first `n` fires
    in (start, end]; `next_fire(after)` its first fire after `after`.

    The pending fire is claimed and runs unless `skips` says otherwise. The fires after it up to
    now are each claimed in turn under RUN_ALL (none of which `skips`); under RUN_ONCE and SKIP
    they are never materialised, so they do not run."""
    if pending > now:
        return CatchUp([], [], 0, 0, False, pending)
    later = fires_between(pending, now, count_limit + 1)
    capped = len(later) > count_limit
    later = later[:count_limit]
    runs: list[datetime] = []
    skipped: list[datetime] = []
    (skipped if skips(policy=policy, scheduled_for=pending, now=now, grace=grace) else runs).append(pending)
    if backfills(policy):
        for fire in later:
            (skipped if skips(policy=policy, scheduled_for=fire, now=now, grace=grace) else runs).append(fire)
    else:
        skipped.extend(later)
    runs.sort()
    skipped.sort()
    return CatchUp(
        runs=runs[:limit],
        skipped=skipped[:limit],
        run_count=len(runs),
        skip_count=len(skipped),
        capped=capped,
        next_fire=next_fire(now),
    )
