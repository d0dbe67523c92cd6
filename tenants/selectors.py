import functools
from datetime import datetime
from typing import Any, TypeVar

from django.db import connections
from django.db.models import Model

from tenants.models import INBOUND_ROTATION_GRACE, ApiToken, Tenant


def token_lookup(*, raw: str, using: str = "default") -> ApiToken | None:
    """The live token whose key is `raw`, its tenant loaded with it; None if there is none.

    Every API request asks this first, so it is one statement written once per process, not a
    queryset: building and compiling `select_related(...).filter(...)` was a quarter of the web's
    CPU for a POST /v1/jobs (profiled under gunicorn), three times what the query costs to run."""
    sql, columns = _token_query(using)
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, [ApiToken.hash_key(raw)])
        row = cursor.fetchone()
    if row is None:
        return None
    values = [_converted(value, converters, connection) for value, converters in zip(row, columns, strict=True)]
    count = len(ApiToken._meta.concrete_fields)
    token = _from_row(ApiToken, using, values[:count])
    token.tenant = _from_row(Tenant, using, values[count:])
    return token


@functools.cache
def _token_query(using: str) -> tuple[str, list[tuple]]:
    """The lookup's SQL and, per column, the converters the ORM would apply to its value (SQLite
    returns naive datetimes, which the backend makes aware)."""
    connection = connections[using]
    quote = connection.ops.quote_name
    selected, converters = [], []
    for model, alias in ((ApiToken, "t"), (Tenant, "n")):
        for field in model._meta.concrete_fields:
            selected.append(f"{alias}.{quote(str(field.column))}")
            col = field.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
            converters.append(tuple((converter, col) for converter in found))
    sql = (
        f"SELECT {', '.join(selected)} FROM {quote(ApiToken._meta.db_table)} t"
        f" JOIN {quote(Tenant._meta.db_table)} n ON n.id = t.tenant_id"
        " WHERE t.key_hash = %s AND t.revoked_at IS NULL"
    )
    return sql, converters


def _converted(value: Any, converters: tuple, connection) -> Any:
    for converter, col in converters:
        value = converter(value, col, connection)
    return value


M = TypeVar("M", bound=Model)


def _from_row(model: type[M], using: str, values: list) -> M:
    return model.from_db(using, [field.attname for field in model._meta.concrete_fields], values)


def tenant_get(*, slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


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
