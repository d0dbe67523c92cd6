"""Loaded at start-up by the Python processes that tests run under libfaketime (see
scheduler_project/tests/faketime.py). libfaketime (0.9.10), with the monotonic clock left real,
fails the absolute clock_nanosleep that Python's time.sleep makes (EINVAL): the worker's outcome
thread died of it. select's timeout is relative and left alone, so sleep with that."""

import select
import time


def _sleep(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


time.sleep = _sleep
