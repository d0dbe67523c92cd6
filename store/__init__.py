"""The store seam: `store()` is the implementation of every scheduler statement for the database
in use. This is the one place that asks which database that is."""

from django.db import DEFAULT_DB_ALIAS, connections

from store.base import (
    Beat,
    CancelListener,
    Change,
    DueListener,
    Fire,
    Moved,
    Started,
    Store,
    Success,
    as_uuid,
)

__all__ = [
    "Beat",
    "CancelListener",
    "Change",
    "DueListener",
    "Fire",
    "Moved",
    "Started",
    "Store",
    "Success",
    "as_uuid",
    "store",
]

_stores: dict[str, Store] = {}


def store() -> Store:
    """The store for the default database."""
    vendor = connections[DEFAULT_DB_ALIAS].vendor
    found = _stores.get(vendor)
    if found is None:
        if vendor == "postgresql":
            from store.postgres import PostgresStore

            found = PostgresStore()
        elif vendor == "sqlite":
            found = Store()
        else:
            raise RuntimeError(f"Tickwork runs on PostgreSQL or SQLite, not {vendor}")
        _stores[vendor] = found
    return found
