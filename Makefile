# Two commands: `make demo` and `make test`. Both create .venv if missing and install the project.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint install system-deps ui validate bench bench-quick clean

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

# --durations: CI's log names the slowest tests, so the suite's time (90 min at most in CI) is watched
test: install system-deps lint
	$(BIN)/python -m pytest -q --durations=25

# ruff: lint and format checks (the tree is formatted with `ruff format`).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Unit and Dagster tests only (no subprocess/browser tiers).
test-fast: install
	$(BIN)/python -m pytest -q -m 'not slow'

validate: install
	$(BIN)/dagster definitions validate

# The benchmark suite (benchmarks/suite.py): every stage against a baseline in the same run (ratios of
# medians, peak RSS), at 10M samples a day; the table is also written to <data home>/bench/bench-N.json.
bench: install
	$(BIN)/python benchmarks/suite.py --samples 10000000 --repeats 3

# The same at 1M samples, one repeat (a few minutes).
bench-quick: install
	$(BIN)/python benchmarks/suite.py --samples 1000000 --repeats 1

# Dagster UI on the demo's instance: http://127.0.0.1:3000
ui: install
	$(BIN)/fleet ui

clean:
	rm -rf data .pytest_cache .hypothesis
