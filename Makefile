# Two commands: `make demo` and `make test`. Both create .venv if missing and install the project.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast install system-deps ui validate bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Debian packages the tests use: Chromium (renders the report) and PostgreSQL (production instance test).
system-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "missing Debian packages:$$missing (need root + apt-get to install them)"; fi; \
	fi

demo: install
	$(BIN)/fleet demo

test: install system-deps
	$(BIN)/python -m pytest -q

# Unit and Dagster tests only (no subprocess/browser tiers).
test-fast: install
	$(BIN)/python -m pytest -q -m 'not slow'

validate: install
	$(BIN)/dagster definitions validate

# Synthesis to Parquet vs pyarrow writing the same table from memory (ratio, medians of 3 runs).
bench: install
	$(BIN)/python benchmarks/bench_synth.py

# Dagster UI on the demo's instance: http://127.0.0.1:3000
ui: install
	$(BIN)/fleet ui

clean:
	rm -rf data .pytest_cache .hypothesis
