"""Which database a read goes to. A web request that may read the replica (web/replica.py: a GET
of /v1/ or /dashboard/) opens a `ReadScope` for its duration; Django's router and the store's own
raw reads (`read_alias`) ask it. Outside a scope every read is the primary's: the dispatcher's,
the workers', the sweeper's, and a web request's that writes.

Within a scope the primary still answers:
- the tables that decide who a request is and what it may do (sessions, users, tokens, tenants'
  quotas, login throttling): a revoked token or a fresh password must not be honoured late;
- any read inside a transaction on the primary, and every read after the request has written;
- everything, while the replica is down or lags past the bound (`health`), and when the client
  wrote within the window (`writes`): it reads its own writes.
The decision is taken once per request, at its first read, so that its reads agree with each other.
"""

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

REPLICA = "replica"

# Apps whose rows decide authentication and authorisation: always read on the primary.
PRIMARY_ONLY = frozenset({"auth", "sessions", "contenttypes", "admin", "axes", "tenants"})

# `client()` answers this when it cannot tell yet (a bearer token not yet checked).
UNKNOWN = None


class ReadScope:
    """One request's permission to read the replica. `client()` names who is asking ("tenant:7",
    "user:3", "" for nobody in particular; UNKNOWN until its credentials are checked). `usable` and
    `wrote_recently` are the replica's health and the write marker's answers (injected in tests)."""

    def __init__(
        self,
        client: Callable[[], str | None],
        *,
        usable: Callable[[], bool],
        wrote_recently: Callable[[str], bool],
    ) -> None:
        self._client = client
        self._usable = usable
        self._wrote_recently = wrote_recently
        self.decided: bool | None = None  # whether this request reads the replica, once known
        self.read_replica = False  # whether a read went to it
        self.wrote = False  # whether the request wrote (its later reads are the primary's)

    def allows_replica(self) -> bool:
        if self.wrote:
            return False
        if self.decided is None:
            if not self._usable():
                self.decided = False
            else:
                client = self._client()
                if client is UNKNOWN:
                    return False  # asked again once the credentials are checked
                self.decided = not (client and self._wrote_recently(client))
        return self.decided


_scope: contextvars.ContextVar[ReadScope | None] = contextvars.ContextVar("tickwork_read_scope", default=None)


@contextlib.contextmanager
def read_scope(scope: ReadScope | None) -> Iterator[ReadScope | None]:
    """Reads within may go to the replica as `scope` says (None: the primary's, all of them)."""
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def read_alias() -> str:
    """The database a read of the scheduler's tables goes to now: the store's raw reads for pages
    (store/shared.py, store/postgres/reads.py) ask this, as the ORM asks the router."""
    scope = _scope.get()
    if scope is None or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return DEFAULT_DB_ALIAS
    if scope.allows_replica():
        scope.read_replica = True
        return REPLICA
    return DEFAULT_DB_ALIAS


class ReplicaRouter:
    """DATABASE_ROUTERS' entry when DATABASE_REPLICA_URL is set (scheduler_project/settings.py).
    None answers "the default database"."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        if _scope.get() is None or model._meta.app_label in PRIMARY_ONLY:
            return None
        return read_alias()

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        scope = _scope.get()
        if scope is not None:
            scope.wrote = True  # its reads from here on must see this write
        return None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # the replica holds the primary's rows

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == REPLICA else None
