"""Each pytest-xdist worker its own corner of the machine's servers (`make test` runs the suite on
several workers at once; README, "Running the tests").

pytest-django gives each worker its own test database (test_<name>_gw0, _gw1, …; on SQLite the file
gets the suffix). This plugin gives it the rest, in the worker's environment, before settings.py is
read (pytest-django imports it while loading the initial conftests, before conftest.py; hence a
plugin, `-p testing.xdist_isolation` in pyproject.toml, wrapping that hook):
- its own TICKWORK_VAR_DIR (a gwN folder inside the one given), so the embedded run's SQLite test
  file, the file broker's folders and the sent mail are the worker's own;
- its own Redis database for the end-to-end tests' broker (TICKWORK_TEST_REDIS_DB, which the `live`
  fixture flushes at the start of each test): the first worker keeps the one given (CI: 3), each
  other takes the next of TICKWORK_TEST_REDIS_SPARE_DBS. The other fixed Redis databases (the
  publisher's, the browser stacks', the standalone test's) are each used by one xdist group only
  (conftest.py), so one worker at a time uses each.
Outside xdist (no PYTEST_XDIST_WORKER) nothing changes."""

import os
from pathlib import Path

import pytest

# Redis has 16 databases. CI's are 3 (end-to-end), 4 (publisher), 7 (browser) and 9 (standalone);
# bench/ takes 6 and soak/ 12. These are the rest, in the order further workers take them.
SPARE_REDIS_DBS = "10,11,13,14,15,0,1,2"


@pytest.hookimpl(hookwrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        isolate(int(worker.removeprefix("gw")), worker)
    yield


def isolate(number: int, name: str) -> None:
    base = Path(os.environ.get("TICKWORK_VAR_DIR") or "var")
    if not base.is_absolute():  # settings.py takes a relative one from the checkout
        base = Path(__file__).resolve().parents[1] / base
    os.environ["TICKWORK_VAR_DIR"] = str(base / name)
    if number > 0:
        spares = [db for db in os.environ.get("TICKWORK_TEST_REDIS_SPARE_DBS", SPARE_REDIS_DBS).split(",") if db]
        if number > len(spares):
            raise pytest.UsageError(f"{name} has no Redis database of its own: TICKWORK_TEST_REDIS_SPARE_DBS={spares}")
        os.environ["TICKWORK_TEST_REDIS_DB"] = spares[number - 1].strip()
