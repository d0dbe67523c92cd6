"""What a handler logged during its attempts: the statements that store the lines (read back by
readmodels/logs.py).

The worker captures the lines (worker/log_capture.py) and writes them here in batches: one INSERT
per batch, never one per line. An attempt keeps at most TICKWORK_LOG_LINES_PER_ATTEMPT lines; past
that, one line of its own (the marker, `dropped` > 0) says how many more were not kept, so a
reader sees the cut. Lines go with their execution (a cascade), when the sweeper prunes it.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Max

from executions.models import ExecutionLog

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
