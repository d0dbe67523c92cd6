import secrets

from django.db import transaction

from tenants.models import ApiToken, Tenant


def tenant_create(*, slug: str, name: str = "") -> Tenant:
    return Tenant.objects.create(slug=slug, name=name or slug)


@transaction.atomic
def token_create(*, tenant: Tenant, name: str = "") -> tuple[ApiToken, str]:
    """Create a token and return it with its raw value, which is never stored nor shown again."""
    raw = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(tenant=tenant, name=name, key_prefix=raw[:10], key_hash=ApiToken.hash_key(raw))
    return token, raw
