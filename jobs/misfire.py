"""The misfire policies as pure rules: what happens to a cron job's fires that were due while
nothing dispatched them (the scheduler was down, or the job was paused). No database.

The dispatcher applies them one claimed fire at a time (dispatcher/dispatcher.py): `skips` decides
whether a claimed fire is cancelled instead of run, and after each claimed fire it materialises
the next one, jumping past `now` unless the policy is RUN_ALL. `catch_up` is the closed form of
the dispatcher claiming at one `now` until nothing is due, for a job whose pending fire is
`pending`: what a resume would run and skip (POST /v1/jobs/{id}/resume?dryRun=true). A job's
catch-up window (catchupWindowSec) bounds, under every policy, how old a claimed fire may be and
still run. docs/misfire.md states the rules.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobs.models import MisfirePolicy


def skips(
    *,
    policy: str,
    scheduled_for: datetime,
    now: datetime,
    grace: timedelta,
    window: timedelta | None = None,
    next_fire: Callable[[datetime], datetime] | None = None,
) -> bool:
    """Whether a cron fire claimed at `now` is cancelled rather than run (`skip_reason` says why)."""
    return bool(
        skip_reason(
            policy=policy, scheduled_for=scheduled_for, now=now, grace=grace, window=window, next_fire=next_fire
        )
    )


def skip_reason(
    *,
    policy: str,
    scheduled_for: datetime,
    now: datetime,
    grace: timedelta,
    window: timedelta | None = None,
    next_fire: Callable[[datetime], datetime] | None = None,
) -> str:
    """Why a cron fire claimed at `now` is cancelled rather than run, or "" when it runs.

    The catch-up window (the job's catchupWindowSec, `window`; None: none) comes first, under every
    policy: a fire more than `window` old is skipped. Under RUN_ONCE the fire claimed is the one
    catch-up run that stands for every fire missed up to now (the others are never materialised),
    so it runs if the latest of them (the schedule's last fire at or before now, found with
    `next_fire(after)`) is within the window. Then SKIP's own rule: a fire more than `grace`
    late is a missed one. RUN_ONCE and RUN_ALL run every other fire they claim."""
    if window is not None and scheduled_for < now - window:
        latest_in_window = (
            policy == MisfirePolicy.RUN_ONCE
            and next_fire is not None
            # The first fire at or after now - window (next_fire is strictly after its argument).
            and next_fire(now - window - _TICK) <= now
        )
        if not latest_in_window:
            return (
                f"missed fire of {scheduled_for.isoformat()} skipped: older than the catch-up window "
                f"(catchupWindowSec {int(window.total_seconds())})"
            )
    if policy == MisfirePolicy.SKIP and scheduled_for < now - grace:
        return f"missed fire of {scheduled_for.isoformat()} skipped (misfirePolicy SKIP)"
    return ""


_TICK = timedelta(microseconds=1)


def window_of(seconds: int | None) -> timedelta | None:
    """A job's catchupWindowSec as the rules take it."""
    return None if seconds is None else timedelta(seconds=seconds)


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
    window: timedelta | None = None,
) -> CatchUp:
    """What the dispatcher, claiming at `now` until nothing is due, does with a cron job whose
    pending fire is `pending`. `fires_between(start, end, n)` gives the schedule's first `n` fires
    in (start, end]; `next_fire(after)` its first fire after `after`; `window` the job's catch-up
    window (None: none).

    The pending fire is claimed and runs unless `skip_reason` says otherwise. The fires after it up
    to now are each claimed in turn under RUN_ALL (each of which runs unless it is older than the
    window); under RUN_ONCE and SKIP they are never materialised, so they do not run."""
    if pending > now:
        return CatchUp([], [], 0, 0, False, pending)
    later = fires_between(pending, now, count_limit + 1)
    capped = len(later) > count_limit
    later = later[:count_limit]
    runs: list[datetime] = []
    skipped: list[datetime] = []

    def claim(fire: datetime) -> None:
        late = skips(policy=policy, scheduled_for=fire, now=now, grace=grace, window=window, next_fire=next_fire)
        (skipped if late else runs).append(fire)

    claim(pending)
    if backfills(policy):
        for fire in later:
            claim(fire)
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
