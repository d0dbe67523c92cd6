"""Executions as every page lists them (_execution_rows.html: the executions page, a job's page,
a dead-letter group): which may still be cancelled or re-driven, and why a pending one waits."""

from collections.abc import Sequence

from executions.clock import db_now
from executions.models import Execution
from executions.states import ACTIVE, REDRIVABLE, ExecutionState
from readmodels.pending_reasons import pending_reasons

__all__ = ["CANCELLABLE", "REDRIVABLE", "with_pending_reasons"]

# The states in which an execution may still be cancelled.
CANCELLABLE = frozenset({ExecutionState.PENDING, *ACTIVE})


def with_pending_reasons(executions: Sequence[Execution]) -> None:
    """Each execution of a page with its reason to wait (`pending_reason`, None unless it waits),
    read for the page at once."""
    reasons = pending_reasons(list(executions), now=db_now())
    for execution in executions:
        execution.pending_reason = reasons.get(execution.pk)  # type: ignore[attr-defined]
