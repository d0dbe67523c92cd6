"""libfaketime for tests that run a process under a shifted clock (Debian: apt-get install faketime)."""

import os
from pathlib import Path

import pytest

# A sitecustomize that works around libfaketime's time.sleep (see its docstring).
_SITE = Path(__file__).resolve().parent / "faketime_site"

_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)


def faketime_env(offset: str) -> dict[str, str]:
    """The environment that runs a process with its wall clock moved by `offset` ("-25s",
    "+25s"); its monotonic clock is left alone, as a host's wrong wall clock would leave it.
    Skips the test if libfaketime is not installed."""
    library = next((path for path in _CANDIDATES if Path(path).exists()), None)
    if library is None:
        pytest.skip("libfaketime is not installed (apt-get install faketime): cannot shift a process's clock")
    return {
        "LD_PRELOAD": library,
        "FAKETIME": offset,
        # Leases and heartbeats are timed on the monotonic clock (which a host's wrong wall
        # clock does not move), and Python's waits hang when libfaketime shifts it.
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(_SITE), os.environ.get("PYTHONPATH")])),
    }
