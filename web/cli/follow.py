"""`executions logs ID --follow`: an execution's log lines printed as they are written, until it
ends (or Ctrl-C).

It asks again every `interval` for the lines after the last one printed, by position (attempt,
seq), as a client tails `GET /v1/executions/{id}/logs?after=`: a retry's lines follow the failed
attempt's. Time is injected (`sleep`), so a test drives the loop without waiting.
"""

from collections.abc import Callable

from executions.models import Execution, ExecutionLog
from executions.states import TERMINAL
from readmodels.logs import log_lines
from readmodels.selectors import execution_get

# As often as the dashboard's logs panel reads a running execution's lines.
INTERVAL = 1.0


def follow(
    *,
    execution: Execution,
    attempt: int | None = None,
    emit: Callable[[list[ExecutionLog]], None],
    sleep: Callable[[float], None],
    interval: float = INTERVAL,
) -> None:
    """Emit the execution's lines (or `attempt`'s), then each new batch as it comes, until it is in a terminal
    state and one more look found what was written at its end: an atomic handler's last lines
    are written just after its outcome commits (worker/log_capture.py), so the look that first
    sees the end may come before them."""
    after: tuple[int, int] | None = None
    seen_end = False
    while True:
        current = execution_get(scope=[execution.tenant_id], execution_id=execution.pk)
        ended = current is None or current.state in TERMINAL  # None: pruned or deleted meanwhile
        lines = list(log_lines(execution=execution, attempt=attempt, after=after))
        if lines:
            emit(lines)
            after = (lines[-1].attempt, lines[-1].seq)
        if ended and seen_end:
            return
        seen_end = ended
        sleep(interval)
