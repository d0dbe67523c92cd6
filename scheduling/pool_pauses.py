"""Pausing a whole pool: nothing of it is admitted while it is paused (the claim skips it,
scheduling/admission.py); what is QUEUED or RUNNING finishes; resume admits again at once.

Pools are shared by every tenant, so pausing one is an operator's (staff) action; the callers
(the API, the dashboard) check that and audit it. Both services are idempotent: pausing a paused
pool keeps who paused it first and when, resuming a pool that is not paused changes nothing."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from jobs import registry as job_registry
from pools.models import PoolPause
from store import store


class UnknownPool(Exception):
    """No pool of that name is configured or named by a handler."""


@dataclass(frozen=True)
class PoolChange:
    pause: PoolPause | None  # the pool's pause after the action; None: it is not paused
    changed: bool  # False when it already was as asked


def known_pool(pool: str) -> str:
    if pool not in job_registry.pools():
        raise UnknownPool(f"no pool named {pool!r}; the pools are {', '.join(job_registry.pools())}")
    return pool


def pool_pause(*, pool: str, by: str, reason: str = "", now: datetime) -> PoolChange:
    """Pause `pool` from `now`: the next claim admits nothing of it."""
    known_pool(pool)
    with transaction.atomic():
        pause, created = PoolPause.objects.get_or_create(
            pool=pool, defaults={"paused_at": now, "paused_by": by[:200], "reason": reason[:500]}
        )
    return PoolChange(pause, created)


def pool_resume(*, pool: str, now: datetime) -> PoolChange:
    """Resume `pool`: its due work is admitted at the dispatchers' next claim, which this wakes
    (PostgreSQL; the embedded default's dispatchers poll)."""
    known_pool(pool)
    with transaction.atomic():
        deleted, _ = PoolPause.objects.filter(pool=pool).delete()
        if deleted:
            store().notify_due(now)
    return PoolChange(None, bool(deleted))


def paused_pools() -> dict[str, PoolPause]:
    """Every paused pool's pause, by pool: a handful of rows at most."""
    return {p.pool: p for p in PoolPause.objects.all()}
