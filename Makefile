# Two commands: `make demo` and `make test`. Both create .venv if missing and install the project.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast test-durations lint install system-deps ui validate bench bench-quick docs clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Debian packages the tests use: Chromium (renders the report), PostgreSQL (production instance test),
# Prometheus with promtool (the Prometheus ingest tests backfill and query a real server) and Redis (the
# Celery workers' broker).
system-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	{ command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } || missing="$$missing prometheus"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "missing Debian packages:$$missing (need root + apt-get to install them)"; fi; \
	fi

demo: install
	$(BIN)/fleet demo

# Tests run in TEST_WORKERS processes (pytest-xdist); a server's tests, and a module's, share one process,
# so each server and each module fixture starts once. Most tests wait on processes, servers and browsers,
# so 3 processes beat 2 on this 2-core machine. CI's log names the 25 slowest tests; every test's time is
# kept in .test-durations.json (`python -m tests.support.tiers .test-durations.json` sums it by tier).
TEST_WORKERS ?= 3
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
test: install system-deps lint
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) --durations=25 --durations-path .test-durations.json

# ruff: lint and format checks (the tree is formatted with `ruff format`); import-linter: the layers and
# no import cycles (contracts in pyproject.toml); pyright (basic): the library, the model and the generator.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/pyright

# The inner loop: every test that starts no process, server or browser, runs no big input and no whole
# asset graph (markers from the fixtures they use); hypothesis at a fifth of its examples.
test-fast: install
	FLEET_TEST_TIER=fast $(BIN)/python -m pytest -q -m 'not slow' $(PYTEST_PARALLEL)

# Each test's time in one process, kept in tests/durations.json so the tiers can be checked
# (`python -m tests.support.tiers`).
test-durations: install system-deps
	$(BIN)/python -m pytest -q -p no:xdist --durations-path tests/durations.json
	$(BIN)/python -m tests.support.tiers tests/durations.json

validate: install
	$(BIN)/dagster definitions validate

# The benchmark suite (benchmarks/suite.py): every stage against a baseline in the same run (ratios of
# medians, peak RSS), at 10M samples a day; the table is also written to <data home>/bench/bench-N.json.
bench: install
	$(BIN)/python benchmarks/suite.py --samples 10000000 --repeats 3

# The same at 1M samples, one repeat (a few minutes).
bench-quick: install
	$(BIN)/python benchmarks/suite.py --samples 1000000 --repeats 1

# The docs site (docs/, reference pages generated from the sources) into site/; strict: a broken link or
# a page missing from the navigation fails it. mkdocs-material prints a banner about MkDocs 2.0 on every
# build; MkDocs 1.6 is what it supports, so the banner is turned off.
docs: install
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

# Dagster UI on the demo's instance: http://127.0.0.1:3000
ui: install
	$(BIN)/fleet ui

clean:
	rm -rf data site .pytest_cache .hypothesis .test-durations.json
