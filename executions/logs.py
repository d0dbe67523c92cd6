"""What a handler logged during its attempts: the statements that store the lines and read them.

The worker captures the lines (worker/log_capture.py) and writes them here in batches: one INSERT
per batch, never one per line. An attempt keeps at most TICKWORK_LOG_LINES_PER_ATTEMPT lines; past
that, one line of its own (the marker, `dropped` > 0) says how many more were not kept, so a
reader sees the cut. Lines go with their execution (a cascade), when the sweeper prunes it.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Max, Q, QuerySet

from executions.models import Execution, ExecutionLog

# The marker's logger: the scheduler's, not a handler's.
MARKER_LOGGER = "tickwork"


@dataclass(frozen=True)
class Line:
    """One line to store, as the worker captured it (already storable and cut to its bytes)."""

    seq: int
    at: datetime
    level: str
    logger: str
    message: str


def log_lines_stored(*, execution_id: Any, attempt: int) -> int:
    """The highest seq stored for the attempt (0 if none): where a new delivery of the same
    attempt continues, after a worker shutting down released it."""
    return ExecutionLog.objects.filter(execution_id=execution_id, attempt=attempt).aggregate(top=Max("seq"))["top"] or 0


def log_lines_write(*, execution_id: Any, attempt: int, lines: list[Line]) -> None:
    """Store `lines` of the attempt in one statement. A line whose (attempt, seq) is stored
    already is skipped, not an error: the only writer of an attempt's seqs is the delivery that
    holds them, so such a line can only be a stale copy (a delivery forced out while writing)."""
    ExecutionLog.objects.bulk_create(
        [
            ExecutionLog(
                execution_id=execution_id,
                attempt=attempt,
                seq=line.seq,
                at=line.at,
                level=line.level,
                logger=line.logger,
                message=line.message,
            )
            for line in lines
        ],
        ignore_conflicts=True,
    )


def log_marker_write(*, execution_id: Any, attempt: int, seq: int, at: datetime, dropped: int, limit: int) -> None:
    """Say, on the attempt's line `seq` (after its last kept line), that `dropped` lines were not
    kept: inserted the first time, its count brought up to date after."""
    message = (
        f"{dropped} more line{'' if dropped == 1 else 's'} not kept: an attempt keeps at most {limit} lines "
        "(TICKWORK_LOG_LINES_PER_ATTEMPT)"
    )
    updated = ExecutionLog.objects.filter(execution_id=execution_id, attempt=attempt, seq=seq).update(
        dropped=dropped, message=message
    )
    if not updated:
        ExecutionLog.objects.bulk_create(
            [
                ExecutionLog(
                    execution_id=execution_id,
                    attempt=attempt,
                    seq=seq,
                    at=at,
                    level="WARNING",
                    logger=MARKER_LOGGER,
                    message=message,
                    dropped=dropped,
                )
            ],
            ignore_conflicts=True,
        )


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
