"""What a handler receives: who it is running as, its payload, and ways to cooperate."""

import threading
from dataclasses import dataclass, field
from typing import Any


class ExecutionStopped(Exception):
    """Raised inside a handler by `check_cancelled` when it must stop: cancelled, timed out, or
    its lease was taken away. The runner records the right outcome."""


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

    def save_checkpoint(self, data: Any) -> None:
        """Persist progress (JSON) fenced by this attempt's lease; a retry resumes from it."""
        self._checkpoint_store.save(data)

    def load_checkpoint(self) -> Any:
        return self._checkpoint_store.load()
