from datetime import datetime

from django.db.models.functions import Now

from tenants.models import INBOUND_ROTATION_GRACE, SIGNING_ROTATION_GRACE, ApiToken, Tenant


def tenant_get(*, slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def token_ever_issued(*, raw: str) -> ApiToken | None:
    """The token whose key is `raw`, revoked or not, with its tenant: who a refused credential was
    (web.authentication.token_of finds only live ones)."""
    return ApiToken.objects.select_related("tenant").filter(key_hash=ApiToken.hash_key(raw)).first()


def tenants_of_user(*, user) -> list[Tenant] | None:
    """The tenants a user may see; None means all of them (staff)."""
    if user.is_staff:
        return None
    return list(Tenant.objects.filter(members=user))


def scope_of(*, user) -> list[int] | None:
    """Tenant ids a caller may see: a token sees its tenant, a member its tenants, staff all
    (None). Every selector filters by this; no view builds an unscoped query."""
    token_tenant = getattr(user, "tenant", None)
    if token_tenant is not None:
        return [token_tenant.pk]
    if user is None or not user.is_authenticated:
        return []
    if user.is_staff:
        return None
    return list(Tenant.objects.filter(members=user).values_list("pk", flat=True))


def tenant_for_create(*, scope: list[int] | None, slug: str | None) -> Tenant | None:
    """The tenant a new job goes to: the one named, if the caller may use it, or else the caller's
    only tenant. None when there is no such tenant (or several and none named)."""
    tenants = Tenant.objects.all() if scope is None else Tenant.objects.filter(pk__in=scope)
    if slug:
        return tenants.filter(slug=slug).first()
    candidates = list(tenants[:2])
    return candidates[0] if len(candidates) == 1 else None


def inbound_secrets(*, tenant: Tenant, now: datetime) -> list[str]:
    """The secrets an inbound webhook of the tenant may be signed with at `now`: its current one
    and, within INBOUND_ROTATION_GRACE of a rotation, the one rotated out. [] for a tenant that
    has never had one (no webhook of it verifies)."""
    found = [tenant.inbound_secret] if tenant.inbound_secret else []
    rotated_at = tenant.inbound_secret_rotated_at
    if tenant.inbound_secret_previous and rotated_at is not None and now < rotated_at + INBOUND_ROTATION_GRACE:
        found.append(tenant.inbound_secret_previous)
    return found


def signing_secrets(*, tenant: Tenant, now: datetime) -> list[str]:
    """The secrets what the tenant's jobs and alerts send is signed with at `now`: its current
    one first and, within SIGNING_ROTATION_GRACE of a rotation, the one rotated out (a signature
    with each, so a receiver with either verifies)."""
    found = [tenant.signing_secret]
    rotated_at = tenant.signing_secret_rotated_at
    if tenant.signing_secret_previous and rotated_at is not None and now < rotated_at + SIGNING_ROTATION_GRACE:
        found.append(tenant.signing_secret_previous)
    return found


def signing_secrets_now(*, slug: str) -> list[str]:
    """signing_secrets of the tenant `slug` at the database's time, in one statement (for a worker
    about to send: the secrets as they are now, not as when its run started)."""
    tenant = Tenant.objects.annotate(db_now=Now()).get(slug=slug)
    return signing_secrets(tenant=tenant, now=tenant.db_now)
