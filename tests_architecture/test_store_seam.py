"""The scheduler's SQL lives in the store (docs/architecture.md, "The store seam"): no product
module outside store/ opens a cursor or runs raw SQL, but those named here, which do not touch
the scheduler's tables."""

import ast

from tests_architecture.test_shape import ROOT, _product_files

# Each with why its SQL is not the store's.
OUTSIDE_THE_STORE = {
    # The readiness probe asks whether the database answers at all (SELECT 1), on any database.
    "web/health.py",
    # Reads and marks django-celery-beat's tables, another scheduler's, to import its jobs.
    "worker/beat_import.py",
}


def _runs_raw_sql(tree: ast.AST) -> bool:
    """A call of `<anything>.cursor()` or `<anything>.raw(…)`: a cursor, or a raw queryset."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("cursor", "raw")
        for node in ast.walk(tree)
    )


def test_only_the_store_runs_raw_sql():
    found = set()
    for path in _product_files():
        relative = str(path.relative_to(ROOT))
        if relative.startswith("store/"):
            continue
        if _runs_raw_sql(ast.parse(path.read_text(), relative)):
            found.add(relative)

    assert found == OUTSIDE_THE_STORE
