# Two commands: `make demo` and `make test`. Both create .venv if missing and install the project.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast install system-deps ui validate clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Headless Chromium renders the report in the browser tests (Debian package).
system-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (Debian package) for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	  else echo "chromium is missing and cannot be installed here (need root + apt-get): browser tests will fail"; fi; }

demo: install
	$(BIN)/fleet demo

test: install system-deps
	$(BIN)/python -m pytest -q

# Unit and Dagster tests only (no subprocess/browser tiers).
test-fast: install
	$(BIN)/python -m pytest -q -m 'not slow'

validate: install
	$(BIN)/dagster definitions validate

# Dagster UI on the demo's instance: http://127.0.0.1:3000
ui: install
	$(BIN)/fleet ui

clean:
	rm -rf data .pytest_cache .hypothesis
