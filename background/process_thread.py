"""A background thread of which each process has one, started on first use.

Celery's prefork pool forks its worker processes from a parent in which such a thread may already
run; a thread does not survive a fork, so each process checks the pid and starts its own.
"""

import os
import threading
from typing import Any, ClassVar, Self


class ProcessThread(threading.Thread):
    _lock = threading.Lock()
    # Each subclass's own (read through the class's __dict__, so a subclass never sees its base's).
    _current: ClassVar["ProcessThread"]

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.pid = os.getpid()

    @classmethod
    def of_process(cls, *args: Any) -> Self:
        """This process's thread of this class, made with `args` (and made again if `args` differ
        from those of the current one, as `serves` decides)."""
        current = cls.__dict__.get("_current")
        if current is None or current.pid != os.getpid() or not current.serves(*args):
            with ProcessThread._lock:
                current = cls.__dict__.get("_current")
                if current is None or current.pid != os.getpid() or not current.serves(*args):
                    current = cls(*args)
                    cls._current = current
                    current.start()
        return current

    @classmethod
    def current(cls) -> Self | None:
        """This process's thread of this class, if it has started one."""
        current = cls.__dict__.get("_current")
        return current if current is not None and current.pid == os.getpid() else None

    def serves(self, *args: Any) -> bool:
        return True
