# The two commands: `make demo` and `make test`. Each creates or reuses .venv and
# installs what it needs first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= test,plot,mysql,docker,hf,ray,parquet,intercode,server,ors,integrations,bfcl
# BFCL's official data and checkers; installed without its dependencies (see docs/bfcl.md)
BFCL_EVAL ?= bfcl-eval==2026.3.23
OUT ?= out/demo
PYTEST_ARGS ?=

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	$(if $(BFCL_EVAL),$(BIN)/python -m pip install -q --no-deps '$(BFCL_EVAL)')
	$(BIN)/agentenvs sandbox provision >/dev/null
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/agentenvs demo --out $(OUT)

# `make test` leaves out the long runs (marker `long`: the 1,000-episode soaks, contracts over
# every bundled task); `make test-all`, which CI runs, runs everything
test: $(STAMP)
	$(BIN)/python -m pytest -m "not long" $(PYTEST_ARGS)

.PHONY: test-all
test-all: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check agentenvs tests benchmarks

bench: $(STAMP)
	@for f in benchmarks/bench_*.py benchmarks/peers/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) out build dist .pytest_cache
