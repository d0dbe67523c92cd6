from django.utils import timezone
from rest_framework import authentication, exceptions, serializers

from store import store
from tenants.models import ApiToken, Tenant
from tenants.selectors import scope_of, tenant_for_create


class TokenPrincipal:
    """The caller behind a bearer token: acts for exactly one tenant."""

    is_authenticated = True
    is_staff = False

    def __init__(self, token: ApiToken) -> None:
        self.token = token
        self.tenant = token.tenant

    def __str__(self) -> str:
        return f"token {self.token.key_prefix} of {self.tenant.slug}"


def token_of(raw: str) -> ApiToken | None:
    """The live token whose key is `raw`, its tenant loaded with it; None if there is none
    (one prepared statement: `Store.api_token`)."""
    return store().api_token(key_hash=ApiToken.hash_key(raw))


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        # The scheme is case-insensitive (RFC 9110); another scheme is left to the next authenticator.
        if not parts or parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        token = token_of(parts[1])
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        # Touch at most once a minute: a write per request would make every GET a write.
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return TokenPrincipal(token), token

    def authenticate_header(self, request) -> str:
        return self.keyword


def actor_of(request) -> str:
    """Who a request acts as, in a line (what a job's version records as its author): a token by
    its name if it has one, its prefix and its tenant; a session by its username."""
    if isinstance(request.user, TokenPrincipal):
        token = request.user.token
        named = f"{token.name} ({token.key_prefix})" if token.name else token.key_prefix
        return f"token {named} of {token.tenant.slug}"
    return f"user {request.user.get_username()}"


def tenant_to_write_in(request, slug: str | None, *, what: str) -> Tenant:
    """The tenant a request writes in (creates `what`, e.g. "jobs", "events"): a token's own; a
    session's named one among those it may use, or its only one. A token naming another tenant is
    refused rather than ignored: the caller has a mistake to learn of."""
    token_tenant = getattr(request.user, "tenant", None)
    if token_tenant is not None:
        if slug and slug != token_tenant.slug:
            raise serializers.ValidationError({"tenant": [f"a token writes {what} only in its own tenant"]})
        return token_tenant
    tenant = tenant_for_create(scope=scope_of(user=request.user), slug=slug)
    if tenant is not None:
        return tenant
    if slug:
        raise serializers.ValidationError({"tenant": [f"unknown tenant '{slug}'"]})
    raise serializers.ValidationError({"tenant": ["is required for a session that can see several tenants"]})
