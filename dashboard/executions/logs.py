"""The execution page's logs panel: what one attempt of the execution logged (readmodels/logs.py),
and whether the page follows it live.

The lines commit no execution events, so the live feed cannot say when there are more: while the
execution is RUNNING and the panel shows its current attempt, the page reads the panel again every
second (`data-poll-src`, static/dashboard/app.js) and the server stops that by rendering the panel
without it once the run has ended. One indexed read of an attempt's lines per open page a second,
only while it runs; the feed's events still bring the rest of the page (the outcome, a new
attempt) as they do today.
"""

from dataclasses import dataclass

from django.db.models import QuerySet

from executions.models import Execution, ExecutionLog
from executions.states import ExecutionState
from readmodels.logs import log_attempts, log_dropped, log_lines

# The most lines the page shows of an attempt; past it, the panel points to the API, which has them
# all (an attempt keeps TICKWORK_LOG_LINES_PER_ATTEMPT, 1,000 by default: all of them fit).
SHOWN = 2000
POLL_MS = 1000


@dataclass(frozen=True)
class LogsPanel:
    execution: Execution
    attempt: int  # the attempt shown
    attempts: list[int]  # those to choose from: the ones that logged, and the current one
    lines: list[ExecutionLog]
    more: bool  # lines past SHOWN, not shown
    dropped: int  # lines the attempt logged past its limit, not kept
    live: bool  # the page reads the panel again every POLL_MS
    poll_ms: int = POLL_MS


def logs_panel(*, execution: Execution, attempt: str | int | None) -> LogsPanel:
    """The panel for `attempt` (as the page's query gives it); the current attempt if it is not
    one of the execution's."""
    try:
        shown = int(attempt) if attempt is not None else execution.attempt
    except ValueError:
        shown = execution.attempt
    if not 1 <= shown <= execution.attempt:
        shown = execution.attempt
    lines: QuerySet[ExecutionLog] = log_lines(execution=execution, attempt=shown)
    page = list(lines[: SHOWN + 1])
    return LogsPanel(
        execution=execution,
        attempt=shown,
        attempts=sorted({*log_attempts(execution=execution), execution.attempt}),
        lines=page[:SHOWN],
        more=len(page) > SHOWN,
        dropped=log_dropped(execution=execution).get(shown, 0),
        live=execution.state == ExecutionState.RUNNING and shown == execution.attempt,
    )
