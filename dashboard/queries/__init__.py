"""The dashboard's store seam: `queries()` is the implementation, for the database in use, of the
few reads the ORM cannot spell the same way on both (a planner's estimate, percentiles in one
pass, a statement's time budget, a merge of ordered walks). This is the one place in the
dashboard that asks which database that is."""

from django.db import DEFAULT_DB_ALIAS, connections

from dashboard.queries.base import OverBudget, Queries

__all__ = ["OverBudget", "Queries", "queries"]

_queries: dict[str, Queries] = {}


def queries() -> Queries:
    """The dashboard's reads for the default database."""
    vendor = connections[DEFAULT_DB_ALIAS].vendor
    found = _queries.get(vendor)
    if found is None:
        if vendor == "postgresql":
            from dashboard.queries.postgres import PostgresQueries

            found = PostgresQueries()
        elif vendor == "sqlite":
            found = Queries()
        else:
            raise RuntimeError(f"Tickwork runs on PostgreSQL or SQLite, not {vendor}")
        _queries[vendor] = found
    return found
