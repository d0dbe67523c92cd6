"""What a handler logged during its attempts, as the API, the command line and the dashboard read
it: the lines the worker stored (executions/logs.py), in order, and what an attempt dropped past
its bound."""

from django.db.models import Q, QuerySet

from executions.models import Execution, ExecutionLog


def log_lines(*, execution: Execution, attempt: int | None = None, after: tuple[int, int] | None = None) -> QuerySet:
    """The execution's lines in order (attempt, then seq): all of them, or `attempt`'s; only
    those after the line `after` = (attempt, seq), when given (the next page, or a tail)."""
    lines = ExecutionLog.objects.filter(execution=execution)
    if attempt is not None:
        lines = lines.filter(attempt=attempt)
    if after is not None:
        after_attempt, after_seq = after
        lines = lines.filter(Q(attempt__gt=after_attempt) | Q(attempt=after_attempt, seq__gt=after_seq))
    return lines.order_by("attempt", "seq")


def log_dropped(*, execution: Execution) -> dict[int, int]:
    """Per attempt of the execution that dropped lines past its bound: how many."""
    dropped: dict[int, int] = {}
    for attempt, count in ExecutionLog.objects.filter(execution=execution, dropped__gt=0).values_list(
        "attempt", "dropped"
    ):
        dropped[attempt] = dropped.get(attempt, 0) + count
    return dropped


def log_attempts(*, execution: Execution) -> list[int]:
    """The attempts of the execution that logged something, in order."""
    return list(
        ExecutionLog.objects.filter(execution=execution)
        .values_list("attempt", flat=True)
        .distinct()
        .order_by("attempt")
    )
