"""Shared fixtures. Tests run on PostgreSQL (DATABASE_URL), then again on the embedded default (SQLite);
see README, "Running the tests"."""

import inspect
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tenants.services import tenant_create, token_create

# The end-to-end fixtures (`live`: real workers, dispatchers and sweepers) and their hooks.
pytest_plugins = ["testing.fixtures"]


@pytest.fixture(autouse=True)
def _rate_limits_read_afresh():
    """A process reads the limits' definitions every few seconds (pools/rate_limits.py); a test
    defines its own, and must not see the one before's."""
    from pools import rate_limits

    rate_limits.definitions.forget()


@pytest.fixture
def tenant(db):
    return tenant_create(slug="acme")


@pytest.fixture
def other_tenant(db):
    return tenant_create(slug="globex")


def _client_for(tenant) -> APIClient:
    _, raw = token_create(tenant=tenant)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def api(tenant) -> APIClient:
    return _client_for(tenant)


@pytest.fixture
def other_api(other_tenant) -> APIClient:
    return _client_for(other_tenant)


@pytest.fixture
def exact_admission(settings):
    """A pool admits exactly its slots: no buffer on the broker, so each claim shows its choice."""
    settings.TICKWORK_ADMIT_HEADROOM = 1.0
    settings.TICKWORK_ADMIT_MAX_BUFFER = 0


# --- Factories ------------------------------------------------------------------------------------
# Jobs are made through the service (as the API makes them), so each has its first execution.
# Executions are moved on through the state machine, never by writing `state` directly.


@pytest.fixture
def make_job():
    """make_job(tenant, type="CRON", schedule="0 * * * *", ...) -> Job, created by scheduling.job_creation."""
    from datetime import timedelta

    from django.utils import timezone

    from scheduling.job_creation import job_create

    def make(tenant, **fields):
        now = fields.pop("now", None) or timezone.now()
        kind = fields.setdefault("type", "ONCE")
        fields.setdefault("name", f"{kind.lower()} job")
        fields.setdefault("pool", "default")
        fields.setdefault("handler", "noop")
        if kind == "ONCE":
            fields.setdefault("run_at", now + timedelta(hours=1))
        elif kind == "DELAYED":
            fields.setdefault("delay_sec", 3600)
        elif kind == "INTERVAL":
            fields.setdefault("every_sec", 3600)
        else:
            fields.setdefault("schedule", "0 * * * *")
        return job_create(tenant=tenant, fields=fields, now=now).job

    return make


@pytest.fixture
def drive():
    """drive(execution, "DEAD") walks an execution along the state machine, through its named
    transitions, to a state and returns it refreshed. Paths: PENDING → QUEUED → RUNNING →
    SUCCEEDED | FAILED → DEAD, and PENDING → CANCELLED."""
    from datetime import timedelta

    from django.utils import timezone

    from executions import transitions
    from executions.models import Execution
    from executions.states import ExecutionState as S

    def go(execution, target: str) -> Execution:
        now = timezone.now()
        pk = execution.pk
        if target == S.CANCELLED:
            assert transitions.cancel(execution_id=pk, now=now, reason="cancelled"), f"{pk} was not cancelled"
            return Execution.objects.get(pk=pk)
        assert transitions.queue_many([pk], now=now, publish_grace=timedelta(seconds=30)), f"{pk} was not queued"
        if target == S.QUEUED:
            return Execution.objects.get(pk=pk)
        token = Execution.objects.get(pk=pk).lease_token
        started = transitions.start(
            execution_id=pk, lease_token=token, now=now, worker_id="worker-1", lease=timedelta(seconds=30)
        )
        assert started, f"{pk} did not start"
        if target == S.RUNNING:
            pass
        elif target == S.SUCCEEDED:
            assert transitions.succeed(execution_id=pk, lease_token=token, now=now, result={"ok": True})
        elif target in (S.FAILED, S.DEAD):
            assert transitions.fail(execution_id=pk, lease_token=token, now=now, error="boom", traceback="")
            if target == S.DEAD:
                assert transitions.discard(execution_id=pk, source=S.FAILED, now=now, message="attempts exhausted")
        else:
            raise ValueError(f"drive() has no path to {target}")
        return Execution.objects.get(pk=execution.pk)

    return go


# --- Layers -----------------------------------------------------------------------------------------
# Every test is in one layer, decided here rather than by hand (README, "Running the tests"):
# e2e, browser and perf are marked by their modules; of the rest, a test that reaches the database
# (a db fixture or marker) or is marked `integration` (it talks to Redis or RabbitMQ) is an
# integration test, and every other one is a unit test, which `make test-unit` runs with no server.
_OWN_LAYERS = ("e2e", "browser", "perf", "integration")
# (pytest-django's autouse fixtures ask for django_db_setup in every test, so it says nothing.)
_DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "admin_user",
    "admin_client",
    "live_server",
    "live",
}


# --- Both stores -----------------------------------------------------------------------------------
# `make test` runs the suite on PostgreSQL, then again on the embedded default (SQLite and the file
# broker) only what can differ between the two stores: the tests marked `both_stores`. Marked here,
# of the tests that reach a store (not unit tests):
# - the store's conformance suite (marked `store`), and the rest of the packages of the store, of
#   the execution state machine that writes through it, of the roles that run on it (the alerter
#   is one) and tests_e2e (real roles on the store and its broker): their SQL, locks, wake-ups and
#   brokers are the store's own;
# - those of a module that branches on the store (names `connection.vendor`): what it checks
#   differs by store.
# A test elsewhere that covers a store-specific path says `@pytest.mark.both_stores` itself (pages
# over the store's reads). Not marked: the browser tests (the page, not the store), tests_schema
# (PostgreSQL's), tests_smoke and tests_standalone (they start embedded installs of their own
# whatever the run's store). `make test-embedded` passes --both-stores-only, so a `-m` of its own
# (PYTEST_ARGS) still selects within it.
_STORE_PACKAGES = ("store", "executions", "dispatcher", "worker", "maintenance", "background", "alerts", "tests_e2e")
_BRANCHES_ON_STORE = "connection.vendor"


def _branches_on_store(path, seen: dict) -> bool:
    if path not in seen:
        seen[path] = _BRANCHES_ON_STORE in path.read_text()
    return seen[path]


# --- Parallel runs (pytest-xdist, `--dist loadgroup`) ----------------------------------------------
# Tests spread over the workers one by one, but for these, which keep to one worker (an xdist group):
# - a test that uses a module-scoped fixture goes with its module, so the fixture (a stack of
#   processes, a virtualenv) starts once;
# - the browser tests together: their stacks share one Redis database (TICKWORK_TEST_REDIS) and
#   flush it as they start; so do the tests of a module naming a shared Redis database below.
_SHARED_REDIS = ("TICKWORK_TEST_PUBLISHER_REDIS_DB", "TICKWORK_TEST_STANDALONE_REDIS_DB")


def _xdist_group(item, root: Path, seen: dict) -> str | None:
    if item.get_closest_marker("browser"):
        return "browser"
    module = item.path
    if module not in seen:
        source = module.read_text()
        seen[module] = next((name for name in _SHARED_REDIS if name in source), None)
    if seen[module]:
        return seen[module]
    definitions = item._fixtureinfo.name2fixturedefs.values()
    if any(defs[-1].scope in ("module", "package", "class") and _ours(defs[-1], root) for defs in definitions):
        return str(module)
    return None


def _ours(fixturedef, root: Path) -> bool:
    """A fixture of this repository's, not a plugin's: pytest-django's autouse, class-scoped
    `_django_setup_unittest` is in every test's closure, and counting it put each test in its
    module's group, so that whole modules of end-to-end tests ran one after another on one worker."""
    path = Path(inspect.getfile(fixturedef.func))
    return path.is_relative_to(root) and not {"site-packages", ".venv"} & set(path.parts)


def _in_group(item, group: str) -> None:
    """What xdist's loadgroup reads: the group after an `@` in the test's id. pytest-xdist 3.8 writes
    it to `_nodeid`, which pytest 9.2's structured ids no longer read (pytest-xdist issue 1386), so
    the groups were silently ignored; this writes the id pytest does read."""
    from _pytest.nodeid import coerce_node_id

    item._id = coerce_node_id(f"{item.nodeid}@{group}")


def _start_rank(item, root) -> int:
    """The longest first, so that none starts last and keeps one worker busy while the others
    wait: the schema's fuzzing, then the browser stacks (one group, one worker), then the other
    end-to-end tests, those of a group (a module's tests in a row) before those that go alone,
    then the rest, which fill the gaps. (xdist keeps this order of the groups: the Makefile
    passes --no-loadscope-reorder, as its own order is the largest group first.)"""
    if item.path.is_relative_to(root / "tests_schema"):
        return 0
    if item.get_closest_marker("browser"):
        return 1
    if item.get_closest_marker("e2e"):
        return 2 if item.get_closest_marker("xdist_group") else 3
    return 4


def pytest_addoption(parser):
    parser.addoption("--both-stores-only", action="store_true", help="only the tests marked both_stores (conftest.py)")
    # `make test` runs the unit layer on its own first, with every server address closed (Makefile,
    # test-unit), and the rest without it; as options, so that a `-m` of its own still selects within.
    parser.addoption("--units", choices=("only", "skip"), help="only the unit layer's tests, or all but them")


# A wrapper: its first part runs before every other implementation (before `-m` deselects by these
# markers), its last after them all (after pytest-django's sort by kind of database use, which
# would otherwise put every end-to-end test behind the quick ones).
@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    branches, shares = {}, {}
    parallel = bool(getattr(config, "workerinput", None))
    for item in items:
        if not any(item.get_closest_marker(layer) for layer in _OWN_LAYERS):
            touches_database = item.get_closest_marker("django_db") or _DATABASE_FIXTURES & set(item.fixturenames)
            item.add_marker(pytest.mark.integration if touches_database else pytest.mark.unit)
        if not item.get_closest_marker("unit") and (
            item.get_closest_marker("store")
            or item.path.relative_to(config.rootpath).parts[0] in _STORE_PACKAGES
            or _branches_on_store(item.path, branches)
        ):
            item.add_marker(pytest.mark.both_stores)
        if (
            parallel
            and not item.get_closest_marker("xdist_group")
            and (group := _xdist_group(item, config.rootpath, shares))
        ):
            item.add_marker(pytest.mark.xdist_group(group))
            _in_group(item, group)
    yield
    if parallel:
        items.sort(key=lambda item: _start_rank(item, config.rootpath))
    if config.getoption("both_stores_only"):
        _keep(config, items, lambda item: item.get_closest_marker("both_stores"))
    if units := config.getoption("units"):
        _keep(config, items, lambda item: bool(item.get_closest_marker("unit")) == (units == "only"))


def _keep(config, items, wanted) -> None:
    config.hook.pytest_deselected(items=[item for item in items if not wanted(item)])
    items[:] = [item for item in items if wanted(item)]
