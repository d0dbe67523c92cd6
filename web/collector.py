"""Python's cyclic garbage collector held off for the length of a request that makes many objects
at once (POST /v1/jobs/bulk: a 1,000-item body parsed, validated, made into rows and answered).

While such a request runs, its own objects are alive, so each of the collector's young passes
(one per 700 allocations, ~35 a request) finds them all still reachable and moves them on to the
older generations, until a full pass walks every object of the process: about one request in
three, 75-130 ms each (in process, 1,000 ONCE jobs a request), a third of a batch's CPU on
average. Held off, the request's objects are freed by their reference counts when it ends, as
almost all of them are anyway (they make no cycles), and the next young pass is small.

Threads (gunicorn's gthread) share the collector: it is off while any holder runs and on again
when the last one ends, as it was before the first."""

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextlib.contextmanager
def collector_held() -> Iterator[None]:
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
