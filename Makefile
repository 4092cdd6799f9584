# The two commands a new user needs: `make demo` and `make test`. Each creates the virtual
# environment (.venv) and installs system libraries where missing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ENGINE := $(VENV)/.test-engine

.PHONY: demo test test-fast check check-fast lint types schema golden clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "reportgen needs Python 3.11 or newer"'
	@PYTHON=$(PYTHON) ./scripts/bootstrap.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

# A real engine for the tests (transformers serve on the CPU, torch's CPU build).
$(ENGINE): $(STAMP)
	$(PY) -m pip install -q -e '.[dev,test-engine]'
	@touch $@

demo: $(STAMP)
	@PYTHON=$(PYTHON) ./scripts/bootstrap.sh
	$(VENV)/bin/reportgen run campaigns/demo.toml

# The tests, spread over the cores (pytest-xdist), their wall time printed
# (scripts/run_tests.sh says more). `make test PYTEST_ARGS="-k loadgen"` passes arguments to
# pytest; WORKERS=N sets the spread (default: three workers a core).
PYTEST_ARGS ?=
test: $(STAMP) $(ENGINE)
	@PYTHON=$(PYTHON) ./scripts/bootstrap.sh --test
	PY=$(PY) ./scripts/run_tests.sh $(PYTEST_ARGS)

# The day-to-day loop: only the tests that run no whole campaign (not marked `slow`).
test-fast: $(STAMP)
	PY=$(PY) ./scripts/run_tests.sh --fast $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check reportgen tests benchmarks
	$(VENV)/bin/ruff format --check reportgen tests benchmarks

types: $(STAMP)
	$(VENV)/bin/mypy reportgen

# The dev loop: lint, types, tests; check-fast for the quick one (a minute or so).
check: lint types test

check-fast: lint types test-fast

# Regenerate the published JSON Schema after changing reportgen/campaign.py.
schema: $(STAMP)
	# (written compact: a generated file, read by editors; `reportgen schema` prints it readable)
	$(VENV)/bin/reportgen schema | $(VENV)/bin/python -c 'import json, sys; \
	json.dump(json.load(sys.stdin), sys.stdout, separators=(",", ":"), ensure_ascii=False)' \
	> campaigns/campaign.schema.json

# Rewrite tests/golden/ after an intended change to what reports say; review the diff, commit.
golden: $(STAMP)
	$(PY) -m pytest -q tests/unit/render/test_golden.py --update-golden

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
