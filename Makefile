# The targets the README tells people to run.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Tests run on PostgreSQL and Redis; pytest-django creates and drops test_<name>.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/tickwork_test
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install install-dev run test lint bench clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/activate
	$(BIN)/pip install --quiet -r requirements.txt

install-dev: $(BIN)/activate
	$(BIN)/pip install --quiet -r requirements-dev.txt

## Install and run every role on this machine (SQLite and a file broker unless configured).
run: install
	$(BIN)/python manage.py run_standalone --host $(HOST) --port $(PORT)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python manage.py makemigrations --check --dry-run

## Install and run the whole test suite (needs PostgreSQL and Redis on localhost).
test: lint
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install-dev
	$(BIN)/python bench/run.py $(BENCH_ARGS)

## Fault-injection soak on PostgreSQL and Redis (soak/run.py): 8 minutes, 3,000 jobs; -short: 1 minute.
.PHONY: soak soak-short
soak: install-dev
	$(BIN)/python soak/run.py $(SOAK_ARGS)

soak-short: install-dev
	$(BIN)/python soak/run.py --short $(SOAK_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache .hypothesis test-artifacts
