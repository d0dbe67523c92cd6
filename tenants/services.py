import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from django.db import transaction

from tenants.models import ApiToken, Tenant, _new_signing_secret


def tenant_create(*, slug: str, name: str = "", **quotas: int | None) -> Tenant:
    return Tenant.objects.create(slug=slug, name=name or slug, **quotas)


QUOTAS = ("weight", "max_concurrent_executions", "max_active_jobs", "submit_rate_per_minute")


def tenant_update_quotas(*, tenant: Tenant, **quotas: int | None) -> Tenant:
    """Set some of the tenant's quotas (None clears a limit). Admission reads them at every
    claim, so the next one applies them."""
    unknown = set(quotas) - set(QUOTAS)
    assert not unknown, unknown
    for field, value in quotas.items():
        setattr(tenant, field, value)
    tenant.save(update_fields=list(quotas))
    return tenant


@transaction.atomic
def token_create(*, tenant: Tenant, name: str = "") -> tuple[ApiToken, str]:
    """Create a token and return it with its raw value, which is never stored nor shown again."""
    raw = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        tenant=tenant, name=name, key_prefix=raw[: ApiToken.PREFIX_LENGTH], key_hash=ApiToken.hash_key(raw)
    )
    return token, raw


# The submit rate's window: a fixed minute.
SUBMIT_RATE_WINDOW_SECONDS = 60


@dataclass(frozen=True)
class SubmitRate:
    """Where a tenant stands in its submit rate's window after a check: what the RateLimit
    headers say (draft-ietf-httpapi-ratelimit-headers), and why it was refused, if it was."""

    limit: int  # submissions per window
    remaining: int  # left in this window
    reset: int  # seconds until the window ends and the count starts afresh
    refused: str | None = None

    window: ClassVar[int] = SUBMIT_RATE_WINDOW_SECONDS


def submit_rate_check(*, tenant: Tenant, now: datetime, count: int = 1) -> SubmitRate | None:
    """Count `count` job submissions (a bulk request's jobs) against the tenant's per-minute
    rate; None when the tenant has no rate, else where it stands (`refused` says why if they
    would go over it).

    A fixed one-minute window in the cache (Redis in production, so every web process shares
    it). Being approximate at window edges is fine for a rate limit; being shared is not optional.
    A batch is counted whole or not at all: a refused batch of 1,000 gives its count back, so it
    does not use up the minute for the smaller requests that still fit.
    """
    limit = tenant.submit_rate_per_minute
    if limit is None:
        return None
    from django.core.cache import cache

    window = SUBMIT_RATE_WINDOW_SECONDS
    key = f"submit-rate:{tenant.pk}:{int(now.timestamp() // window)}"
    reset = window - int(now.timestamp()) % window
    cache.add(key, 0, timeout=2 * window)
    total = cache.incr(key, count)
    if total > limit:
        if count > 1:
            total = cache.decr(key, count)
        refused = f"tenant '{tenant.slug}' may submit {limit} jobs per minute; try again shortly"
        return SubmitRate(limit=limit, remaining=max(0, limit - total), reset=reset, refused=refused)
    return SubmitRate(limit=limit, remaining=limit - total, reset=reset)


def _new_inbound_secret() -> str:
    # Prefixed so that one found in a log or a config file says what it is.
    return "whsec_" + secrets.token_hex(32)


@transaction.atomic
def inbound_secret_ensure(*, tenant: Tenant) -> str:
    """The tenant's inbound webhook secret, made now if it has none. Under the tenant row's lock,
    so two first calls at once agree on one secret."""
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if not locked.inbound_secret:
        locked.inbound_secret = _new_inbound_secret()
        locked.save(update_fields=["inbound_secret"])
    return locked.inbound_secret


@transaction.atomic
def inbound_secret_rotate(*, tenant: Tenant, now: datetime) -> str:
    """A new inbound secret, which verifies from now on. The one it replaces still verifies until
    `now` + INBOUND_ROTATION_GRACE, and not after (tenants.selectors.inbound_secrets). One previous
    secret is kept: a second rotation within the grace ends the first one's old secret at once."""
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    locked.inbound_secret_previous = locked.inbound_secret
    locked.inbound_secret = _new_inbound_secret()
    locked.inbound_secret_rotated_at = now
    locked.save(update_fields=["inbound_secret", "inbound_secret_previous", "inbound_secret_rotated_at"])
    return locked.inbound_secret


@transaction.atomic
def signing_secret_rotate(*, tenant: Tenant, now: datetime) -> str:
    """A new signing secret, which signs from now on. The one it replaces signs beside it until
    `now` + SIGNING_ROTATION_GRACE (tenants.selectors.signing_secrets), and not after. One
    previous secret is kept: a second rotation within the grace ends the first one's old secret at
    once (which is how a leaked secret is retired without waiting)."""
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    locked.signing_secret_previous = locked.signing_secret
    locked.signing_secret = _new_signing_secret()
    locked.signing_secret_rotated_at = now
    locked.save(update_fields=["signing_secret", "signing_secret_previous", "signing_secret_rotated_at"])
    return locked.signing_secret
