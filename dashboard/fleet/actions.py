"""Pausing and resuming a whole pool from the dashboard: staff only (a pool is every tenant's),
through the same services as the API (scheduling/pool_pauses.py), each audited as the
dashboard's other actions are (dashboard.services.audited_action: one row, in the action's
transaction)."""

from datetime import datetime

from dashboard.services import Actor, Target, audited_action
from scheduling.pool_pauses import PoolChange, pool_pause, pool_resume


def _target(pool: str) -> Target:
    return Target(type="pool", id=pool, label=pool)


def pool_pause_audited(*, actor: Actor, pool: str, reason: str, now: datetime) -> PoolChange:
    return audited_action(
        actor=actor,
        action="pool.pause",
        target=_target(pool),
        now=now,
        run=lambda: pool_pause(pool=pool, by=actor.label, reason=reason, now=now),
        describe=lambda change: (reason or "no reason given") if change.changed else "already paused",
    )


def pool_resume_audited(*, actor: Actor, pool: str, now: datetime) -> PoolChange:
    return audited_action(
        actor=actor,
        action="pool.resume",
        target=_target(pool),
        now=now,
        run=lambda: pool_resume(pool=pool, now=now),
        describe=lambda change: "" if change.changed else "was not paused",
    )
