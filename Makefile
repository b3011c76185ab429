# The two commands: `make demo` and `make test`. Each creates or reuses .venv and
# installs what it needs first: `make demo` the light set (the package's core dependencies
# and LIGHT_EXTRAS), `make test` and `make install` every extra of EXTRAS. Each set has its
# own stamp: `make demo` then `make test` adds the rest to the same .venv, and `make test`
# then `make demo` installs nothing more.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LIGHT_EXTRAS ?= plot
EXTRAS ?= test,plot,mysql,docker,hf,ray,parquet,intercode,server,ors,integrations,bfcl,ecosystem
LIGHT_STAMP := $(VENV)/.installed-light
STAMP := $(VENV)/.installed-full
# BFCL's official data and checkers; installed without its dependencies (see docs/bfcl.md)
BFCL_EVAL ?= bfcl-eval==2026.3.23
# GEM's package, without its dependencies: it pins a reasoning-gym older than the
# ecosystem extra's; what its envs import is in that extra (agentenvs.envs.foreign.gem_env)
GEM_LLM ?= gem-llm==0.1.0
OUT ?= out/demo
PYTEST_ARGS ?=

comma := ,
# "yes" when EXTRAS holds every one of LIGHT_EXTRAS (the full set then stands for the light one)
FULL_HAS_LIGHT = $(if $(filter-out $(subst $(comma), ,$(EXTRAS)),$(subst $(comma), ,$(LIGHT_EXTRAS))),,yes)

$(LIGHT_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[$(LIGHT_EXTRAS)]'
	$(BIN)/agentenvs sandbox provision >/dev/null
	@touch $@

# the full set with a current pip (the light one makes do with the venv's own: a few
# seconds less before the demo)
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	$(if $(BFCL_EVAL),$(BIN)/python -m pip install -q --no-deps '$(BFCL_EVAL)')
	$(if $(and $(GEM_LLM),$(findstring ecosystem,$(EXTRAS))),$(BIN)/python -m pip install -q --no-deps '$(GEM_LLM)')
	$(BIN)/agentenvs sandbox provision >/dev/null
	@touch $@
	$(if $(FULL_HAS_LIGHT),@touch $(LIGHT_STAMP))

.PHONY: install install-light demo test lint bench clean

install: $(STAMP)

# what `make demo` installs before the demo (CI times it)
install-light: $(LIGHT_STAMP)

demo: $(LIGHT_STAMP)
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
