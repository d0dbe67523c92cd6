"""What the store knows of the tables it writes for the layers above it.

The store sits below the execution state machine (executions/), which calls it, and above the
jobs, pools and tenants whose tables it joins (pyproject.toml's layers). So it imports none of
executions' modules: it names their tables and columns in its SQL, the states by their values,
and reaches their models through Django's app registry, as a migration does, for what the ORM
does better than hand-written SQL (the conversion of a column's values as the ORM reads and
writes them, the embedded store's bulk inserts).
"""

from django.apps import apps
from django.db.models import Field, Model


def execution() -> type[Model]:
    """executions.models.Execution."""
    return apps.get_model("executions", "Execution")


def execution_event() -> type[Model]:
    """executions.models.ExecutionEvent."""
    return apps.get_model("executions", "ExecutionEvent")


def execution_field(name: str) -> Field:
    """A concrete field of Execution (get_field could also answer a reverse relation)."""
    field = execution()._meta.get_field(name)
    assert isinstance(field, Field), name
    return field


# The execution states the store's statements name (executions/states.py says what each means).
BLOCKED = "BLOCKED"
PENDING = "PENDING"
QUEUED = "QUEUED"
RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
TIMED_OUT = "TIMED_OUT"
FAILED_WORKER_LOST = "FAILED_WORKER_LOST"
CANCELLED = "CANCELLED"
DEAD = "DEAD"
DISCARDED = "DISCARDED"

# The states no run leaves (executions.states.TERMINAL; store/tests/test_tables.py holds them
# equal).
FINISHED = frozenset({SUCCEEDED, CANCELLED, DEAD, DISCARDED})
