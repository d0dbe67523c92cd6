"""The store: every statement the scheduler runs on its tables, as named operations
(store/interface.py). `store()` is the implementation for the database in use; this is the one
place that asks which database that is.

It sits below the execution state machine that calls it (executions/), and above the jobs,
pools and tenants whose tables it joins: it imports nothing of executions, and names its tables
in SQL (store/tables.py says how, and why).
"""

from django.db import DEFAULT_DB_ALIAS, connections

from store.functions import percentile
from store.interface import CancelListener, DueListener, OverBudget, Store
from store.rows import (
    Beat,
    Change,
    DueRow,
    FailedFire,
    Fire,
    Moved,
    MovedSet,
    Republished,
    Snapshot,
    Started,
    Success,
    as_uuid,
)

__all__ = [
    "Beat",
    "CancelListener",
    "Change",
    "DueListener",
    "DueRow",
    "FailedFire",
    "Fire",
    "Moved",
    "MovedSet",
    "OverBudget",
    "Republished",
    "Snapshot",
    "Started",
    "Store",
    "Success",
    "as_uuid",
    "percentile",
    "store",
]

_stores: dict[str, Store] = {}


def store() -> Store:
    """The store for the default database."""
    vendor = connections[DEFAULT_DB_ALIAS].vendor
    found = _stores.get(vendor)
    if found is None:
        if vendor == "postgresql":
            from store.postgres.store import PostgresStore

            found = PostgresStore()
        elif vendor == "sqlite":
            from store.sqlite.store import SqliteStore

            found = SqliteStore()
        else:
            raise RuntimeError(f"Tickwork runs on PostgreSQL or SQLite, not {vendor}")
        _stores[vendor] = found
    return found
