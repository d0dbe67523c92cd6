"""What a handler logs during an attempt, kept with the attempt: its `ctx.log(...)` lines and the
records of the standard `logging` emitted on its thread while it runs.

Which records: any logger's, as long as the record is emitted on the thread that runs the handler,
between the call and its return. The window is the handler's own: the runner's records (start,
outcome) fall outside it, and everything else a worker process does (heartbeats, the outcome
thread, the live-update sender, the cancel relay, Celery's own consumer and its "Task succeeded")
runs on other threads or outside the window. Any logger rather than only the handler module's:
what a handler calls logs too (an HTTP client's retries, a helper package's warnings), and that is
what an operator reading a failed attempt needs. A record reaches the capture as it reaches any
handler of the root logger: at the logger's level (TICKWORK_LOG_LEVEL by default), and not from a
logger that does not propagate. Threads the handler starts are not followed; `ctx.log` is, from
any thread, and is kept whatever the log level.

Bounded per attempt: TICKWORK_LOG_LINES_PER_ATTEMPT lines, each cut to TICKWORK_LOG_LINE_BYTES
(with a note of what was cut); past the bound the lines are counted, not kept, and one more line
(the marker, executions/logs.py) says how many. Memory is bounded the same way.

Written in batches: a line only joins the attempt's buffer (a lock held for an append, never
across I/O); this process's LogWriter thread writes what gathered every FLUSH_SECONDS, one INSERT
per attempt, and the runner writes the rest when the handler returns or raises, before the
outcome is recorded: a reader who sees the outcome sees every line. (An `atomic=True` handler's
last lines are handed to the LogWriter instead, to be written at once on its own connection: the
runner's connection is then inside the transaction that may roll back, and the lines of a failed
attempt are the ones most worth keeping.) A failed write is logged to the worker's own log and
its lines are lost; it never fails the handler or the run.
"""

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from background.process_thread import ProcessThread
from executions import logs
from executions.storable import storable_text
from worker.context import HandlerContext

logger = logging.getLogger(__name__)
# How long lines gather before the LogWriter writes them: a live page shows them within about this.
FLUSH_SECONDS = 0.5
_MESSAGE = logging.Formatter("%(message)s")  # the message, with its traceback and stack if any
_LOGGER_CHARS = 200  # ExecutionLog.logger's max_length
_LEVEL_CHARS = 16  # ExecutionLog.level's


class AttemptLog:
    """The lines of one delivery of an attempt: kept here until they are written."""

    def __init__(self, *, execution_id: str, attempt: int, name: str, limit: int, line_bytes: int) -> None:
        self.execution_id = execution_id
        self.attempt = attempt
        self.name = name  # the handler's registered name: the logger of its `ctx.log` lines
        self.limit = limit
        self.line_bytes = line_bytes
        # Reentrant: a signal handler that logs may interrupt the handler's thread inside `add`.
        self._lock = threading.RLock()
        self._pending: list[logs.Line] = []
        self._taken = 0  # lines kept so far: the seq of the last one, counted from this delivery
        self._dropped = 0  # lines past the bound, counted and not kept
        self._dirty = False  # something to write since the last flush began
        # One flush at a time (the LogWriter's and the runner's), so lines are written in order.
        self._flushing = threading.Lock()
        # Read at the first write: the attempt's lines stored before this delivery (a delivery
        # after a release continues them), and so how many this one may still keep.
        self._base: int | None = None
        self._over_budget = 0  # kept here but past the attempt's bound once `_base` was known
        self._marker_says = 0  # the dropped count the stored marker line says

    def add(self, level: Any, logger_name: str | None, message: Any, created: float | None = None) -> None:
        """Keep a line (or count it, past the bound). Never raises, never waits for the database."""
        try:
            line = logs.Line(
                seq=0,
                at=datetime.fromtimestamp(time.time() if created is None else created, UTC),
                level=_level_name(level),
                logger=(self.name if logger_name is None else logger_name)[:_LOGGER_CHARS],
                message=_clip(storable_text(str(message)), self.line_bytes),
            )
        except Exception:  # a message whose str() raises: nothing to keep
            return
        with self._lock:
            if self._taken >= self.limit:
                self._dropped += 1
            else:
                self._taken += 1
                self._pending.append(replace(line, seq=self._taken))
            wake, self._dirty = not self._dirty, True
        if wake:
            try:
                LogWriter.of_process().wake(self)
            except Exception:  # no thread to be had: the runner writes the lines at the end
                pass

    def add_record(self, record: logging.LogRecord) -> None:
        try:
            text = _MESSAGE.format(record)
        except Exception:  # arguments that do not fit the format: keep what there is
            text = f"{record.msg!r} (unformattable with arguments {record.args!r})"
        self.add(record.levelname, record.name, text, record.created)

    def flush(self) -> None:
        """Write what gathered: the lines, and the marker if lines were dropped. Never raises."""
        with self._flushing:
            with self._lock:
                lines, self._pending = self._pending, []
                dropped = self._dropped
                self._dirty = False
            try:
                self._write(lines, dropped)
            except Exception as exc:
                logger.warning(
                    "%d log line(s) of execution %s attempt %d not stored",
                    len(lines),
                    self.execution_id,
                    self.attempt,
                    exc_info=True,
                )
                if isinstance(exc, OperationalError | InterfaceError) and not connection.in_atomic_block:
                    connection.close()  # a dropped connection: the next write takes a new one

    def _write(self, lines: list[logs.Line], dropped: int) -> None:
        if self._base is None:
            if not lines and not dropped:
                return
            self._base = logs.log_lines_stored(execution_id=self.execution_id, attempt=self.attempt)
        budget = max(self.limit - self._base, 0)
        kept = [replace(line, seq=self._base + line.seq) for line in lines if line.seq <= budget]
        self._over_budget += len(lines) - len(kept)
        if kept:
            logs.log_lines_write(execution_id=self.execution_id, attempt=self.attempt, lines=kept)
        total = dropped + self._over_budget
        if total != self._marker_says:
            # Every kept line comes before the first one dropped, so the marker's place is fixed:
            # right after the attempt's last line within its bound.
            logs.log_marker_write(
                execution_id=self.execution_id,
                attempt=self.attempt,
                seq=self._base + budget + 1,
                at=datetime.now(UTC),
                dropped=total,
                limit=self.limit,
            )
            self._marker_says = total

    @property
    def dirty(self) -> bool:
        with self._lock:
            return self._dirty


class LogWriter(ProcessThread):
    """The thread of a worker process that writes its attempts' lines while they run: woken by
    an attempt's first line since its last write, it lets lines gather for FLUSH_SECONDS and then
    writes each waiting attempt's in one statement. It holds a database connection only while it
    has lines to write."""

    def __init__(self) -> None:
        super().__init__(name="log-writer")
        self.changed = threading.Condition()
        self.waiting: set[AttemptLog] = set()
        self.urgent = False  # an attempt handed over its last lines: write them without gathering
        self.idle = True  # nothing to write, and no connection held

    def wake(self, log: AttemptLog, *, urgent: bool = False) -> None:
        with self.changed:
            self.waiting.add(log)
            self.urgent = self.urgent or urgent
            self.changed.notify()

    def run(self) -> None:
        while True:
            with self.changed:
                while not self.waiting:
                    self.idle = True
                    self.changed.wait()
                self.idle = False
                deadline = time.monotonic() + FLUSH_SECONDS
                while not self.urgent and (left := deadline - time.monotonic()) > 0:
                    self.changed.wait(left)
                waiting, self.waiting, self.urgent = self.waiting, set(), False
            for log in waiting:
                log.flush()
            with self.changed:
                done = not self.waiting
            if done:  # before `idle` is said, at the top of the loop
                connection.close()


class _ThreadRouter(logging.Handler):
    """On the root logger of a worker process: hands each record emitted on a thread that is
    running a handler to that handler's attempt, and ignores the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts: dict[int | None, AttemptLog] = {}

    def handle(self, record: logging.LogRecord) -> bool:
        # Without Handler.handle's lock: every record of the process passes here, and all this
        # takes is a dict lookup (the attempt's own lock guards its lines).
        log = self.attempts.get(record.thread)
        if log is None:
            return False
        log.add_record(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)


_router = _ThreadRouter()


@contextmanager
def attempt_log(ctx: HandlerContext, *, handler: str) -> Iterator[AttemptLog]:
    """Keep what the handler logs while the block runs (on this thread, and by `ctx.log`), and
    write it when the block ends, as the module's docstring says."""
    log = AttemptLog(
        execution_id=ctx.execution_id,
        attempt=ctx.attempt,
        name=handler,
        limit=settings.TICKWORK_LOG_LINES_PER_ATTEMPT,
        line_bytes=settings.TICKWORK_LOG_LINE_BYTES,
    )
    ctx._lines = log
    root = logging.getLogger()
    if _router not in root.handlers:  # checked each time: a logging reconfiguration drops it
        root.addHandler(_router)
    thread = threading.get_ident()
    _router.attempts[thread] = log
    try:
        yield log
    finally:
        _router.attempts.pop(thread, None)
        if log.dirty:
            if connection.in_atomic_block:
                LogWriter.of_process().wake(log, urgent=True)
            else:
                log.flush()


def flush(ctx: HandlerContext) -> None:
    """Write the lines the handler of `ctx` has logged so far (a handler about to be abandoned)."""
    if isinstance(ctx._lines, AttemptLog):
        ctx._lines.flush()


def _level_name(level: Any) -> str:
    if isinstance(level, int):
        return logging.getLevelName(level)[:_LEVEL_CHARS]
    return (str(level).upper() or "INFO")[:_LEVEL_CHARS]


def _clip(text: str, limit: int) -> str:
    """`text`, cut to at most `limit` bytes of UTF-8 (and a note of how much was cut)."""
    if len(text) * 4 <= limit:  # no character is more than four bytes: nothing to measure
        return text
    data = text.encode()
    if len(data) <= limit:
        return text
    # Room for the note (under 64 bytes); a character cut in two is left out whole.
    kept = data[: max(limit - 64, 0)].decode(errors="ignore")
    return f"{kept} … [{len(data) - len(kept.encode())} more bytes not kept]"
