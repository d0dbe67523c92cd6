# The targets the README tells people to run.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Tests run on PostgreSQL and Redis; pytest-django creates and drops test_<name>.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/tickwork_test
# The second run, on the embedded default: a SQLite file (test_tickwork.sqlite3) under this folder
# and kombu's filesystem broker, for the tests that differ between the stores (marked
# `both_stores` by conftest.py, which says which and why: the store's and the roles' packages, the
# end-to-end tests, and modules that branch on the store).
EMBEDDED_VAR_DIR ?= var/test-embedded
# pytest-xdist: this many test processes at once (many tests wait on subprocesses, so more than
# the CPUs pays); conftest.py keeps what must stay together on one of them (`--dist loadgroup`)
# and orders them longest first (xdist keeps that order with --no-loadscope-reorder);
# testing/xdist_isolation.py gives each its own databases and folders. PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 3
XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder)
# The unit layer is pure logic, a few hundred milliseconds a module: one process per CPU.
XDIST_UNITS = $(if $(filter 0,$(PYTEST_WORKERS)),,-n auto)
# Python's default, whatever the shell says: the compiled modules are kept in __pycache__. Each
# test process (and each role a test starts) otherwise compiles the project again, and pytest
# rewrites every test module's asserts again: 5 of the 9 s each pytest process takes to collect.
unexport PYTHONDONTWRITEBYTECODE
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install install-dev run test test-unit test-perf test-embedded lint bench client clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The checkout on the virtualenv's path (a .pth file, as an editable install makes): the roles'
# entry points (celery -A scheduler_project, daphne's and gunicorn's scheduler_project.*) then
# import it from any working directory, such as systemd's, which is / (deploy/systemd/).
ON_PATH = $(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), "tickwork.pth").write_text("$(CURDIR)\n")'

install: $(BIN)/activate
	$(BIN)/pip install --quiet -r requirements.txt
	$(ON_PATH)

install-dev: $(BIN)/activate
	$(BIN)/pip install --quiet -r requirements-dev.txt
	$(ON_PATH)

## Install and run every role on this machine (SQLite and a file broker unless configured).
run: install
	$(BIN)/python manage.py run_standalone --host $(HOST) --port $(PORT)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python manage.py check
	$(BIN)/python manage.py makemigrations --check --dry-run

## Install and run the whole test suite but the perf layer (needs PostgreSQL, Redis and RabbitMQ
## on localhost): the unit layer with no server, the rest on PostgreSQL, then what differs between
## the stores again on the embedded default.
test: lint
	$(MAKE) --no-print-directory test-unit
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python -m pytest -m "not perf" --units=skip $(XDIST) $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-embedded

## The unit layer: pure logic, no server. Every server address points at a closed port, so a
## test that reached for one would fail here rather than quietly use it.
test-unit: install-dev
	env -u DATABASE_URL -u CELERY_BROKER_URL -u REDIS_URL TICKWORK_VAR_DIR=$(abspath var/test-unit) \
		TICKWORK_TEST_REDIS_URL=redis://127.0.0.1:1 TICKWORK_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:1// \
		$(BIN)/python -m pytest --units=only $(XDIST_UNITS) $(PYTEST_ARGS)

## The perf layer: the dashboard's pages against 1,000,000 executions on PostgreSQL (minutes).
test-perf: install-dev
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python -m pytest -m perf $(PYTEST_ARGS)

test-embedded: install-dev
	rm -rf $(EMBEDDED_VAR_DIR)
	env -u DATABASE_URL -u CELERY_BROKER_URL -u REDIS_URL TICKWORK_VAR_DIR=$(abspath $(EMBEDDED_VAR_DIR)) \
		$(BIN)/python -m pytest -m "not perf" --both-stores-only $(XDIST) $(PYTEST_ARGS)

## A typed Python client of the API, generated from its live schema into clients/python/ (README,
## "Generated client"); URL=https://… takes a running server's schema instead of starting one here.
client: install-dev
	$(BIN)/python clients/generate.py $(if $(URL),--url $(URL))

bench: install-dev
	$(BIN)/pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/run.py $(BENCH_ARGS)

## Fault-injection soak on PostgreSQL and Redis (soak/run.py): 8 minutes, 3,000 jobs; -short: 1 minute.
.PHONY: soak soak-short
soak: install-dev
	$(BIN)/python soak/run.py $(SOAK_ARGS)

soak-short: install-dev
	$(BIN)/python soak/run.py --short $(SOAK_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache .hypothesis test-artifacts
