"""What a handler receives: who it is running as, its payload, and ways to cooperate."""

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ExecutionStopped(Exception):
    """Raised inside a handler by `check_cancelled` when it must stop: cancelled, timed out, or
    its lease was taken away. The runner records the right outcome."""


class HandlerTimedOut(Exception):
    """Raised by a handler whose own deadline passed (the celery handler's `waitTimeoutSec`):
    the attempt ends TIMED_OUT, as when the job's `timeoutSec` passes, and its retry policy
    decides what follows."""


@dataclass
class HandlerContext:
    execution_id: str
    job_id: str
    attempt: int
    payload: dict[str, Any]
    tenant_slug: str
    signing_secret: str
    # Set by the heartbeat when the handler must stop; `reason` says why.
    stop_event: threading.Event = field(default_factory=threading.Event)
    reason: str = ""
    _checkpoint_store: Any = None
    # A workflow step: its run and name. Its upstream steps' results and the event that started
    # it are read when first asked for, so a handler that does not ask pays nothing.
    run_id: str | None = None
    step: str = ""
    _upstream: Callable[[], dict[str, Any]] | None = None
    _event: Callable[[], dict[str, Any] | None] | None = None
    _read: dict[str, Any] = field(default_factory=dict)
    # Where `log` keeps lines: the attempt's log (worker/log_capture.py), set by the runner.
    _lines: Any = None
    # The tenant's signing secrets as they are when asked (set by the runner); without it, the
    # one the run started with.
    _signing_secrets: Callable[[], list[str]] | None = None

    @property
    def upstream(self) -> dict[str, Any]:
        """A workflow step's upstream steps' results, by step name ({} for a plain job)."""
        if "upstream" not in self._read:
            self._read["upstream"] = self._upstream() if self._upstream else {}
        return self._read["upstream"]

    @property
    def event(self) -> dict[str, Any] | None:
        """The event that started this run ({"id", "name", "payload", "receivedAt"}), or None."""
        if "event" not in self._read:
            self._read["event"] = self._event() if self._event else None
        return self._read["event"]

    @property
    def signing_secrets(self) -> list[str]:
        """What to sign an outgoing call with: the tenant's signing secret and, for a day after it
        was rotated, the previous one too (tenants.signing.sign_with puts a signature for each),
        so that every receiver verifies while it moves to the new one."""
        return self._signing_secrets() if self._signing_secrets else [self.signing_secret]

    @property
    def idempotency_key(self) -> str:
        """Stable across the attempts of one execution: use it to make side effects idempotent."""
        return self.execution_id

    def cancelled(self) -> bool:
        return self.stop_event.is_set()

    def check_cancelled(self) -> None:
        if self.stop_event.is_set():
            raise ExecutionStopped(self.reason or "stopped")

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake and raise ExecutionStopped as soon as the run must stop."""
        if self.stop_event.wait(seconds):
            raise ExecutionStopped(self.reason or "stopped")

    def log(self, message: Any, level: str | int = "INFO") -> None:
        """Keep a line with this attempt: shown by `GET /v1/executions/{id}/logs` and on the
        execution's page, whatever the worker's log level. Safe from any thread of the handler's;
        it never raises and never waits for the database (the lines are written in batches)."""
        if self._lines is not None:
            self._lines.add(level, None, message)
        else:  # a context made outside a worker's run (a test, a shell): the standard logging
            number = level if isinstance(level, int) else logging.getLevelName(str(level).upper())
            logging.getLogger("tickwork.handler").log(
                number if isinstance(number, int) else logging.INFO, "%s", message
            )

    def save_checkpoint(self, data: Any) -> None:
        """Persist progress (JSON) fenced by this attempt's lease; a retry resumes from it."""
        self._checkpoint_store.save(data)

    def load_checkpoint(self) -> Any:
        return self._checkpoint_store.load()
