"""Inbound webhooks: who may post an event without a token. A sender signs the raw body with its
tenant's inbound secret (tenants.signing, the scheme the `http` handler signs with outward), and
`hook_sender` says which tenant, if any, that request is from."""

from datetime import datetime

from tenants import signing
from tenants.models import Tenant
from tenants.selectors import inbound_secrets, tenant_get

# Verified against when the tenant is unknown or has no secret, so that the answer takes as long
# as for a known one: its timing does not tell which tenants exist.
_NOBODY = "whsec_" + "0" * 64


def hook_sender(*, slug: str, header: str | None, body: bytes, now: datetime) -> Tenant | None:
    """The tenant `slug` when `header` (X-Tickwork-Signature) signs `body` with one of its inbound
    secrets valid at `now` (the current one; the previous one within an hour of a rotation), at a
    time within signing.TOLERANCE_SECONDS of `now`. None for anything else, alike: a missing,
    malformed, wrong, stale or future signature, an unknown tenant, a tenant with no secret."""
    tenant = tenant_get(slug=slug)
    secrets = inbound_secrets(tenant=tenant, now=now) if tenant is not None else []
    verified = signing.verify(header, body, secrets=secrets or [_NOBODY], now=now.timestamp())
    return tenant if verified and secrets else None
