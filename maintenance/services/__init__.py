"""The background services, one per file, each a class with `run_once(*, now)` that returns its
counts (background/service.py). maintenance/registry.py lists every one of them, with the role
that runs it; a module here that the registry does not list fails tests_architecture."""

# Rows per service and unit of work: a pass that reaches it runs again at once (registry.py).
BATCH = 500
