# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Extras the development environment installs; the library itself needs only the core list.
EXTRAS ?= torch,test,tensorboard,dask,lightning,hf
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
# pip warns of every package index location this machine's pip configuration names but lacks;
# the installs drop those lines, and pipefail keeps pip's own exit status.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
QUIET_PIP   := 2>&1 | { grep -v '^WARNING: Location' || true; }

.PHONY: demo test quick test-notorch lint venv bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$(EXTRAS)]" $(QUIET_PIP)
	@rm -f $(VENV)/.installed-*
	@touch $@

demo: $(STAMP)
	$(BIN)/tracelab demo tracelab-demo

test: lint test-notorch
	$(BIN)/python -m pytest -q

# The same without the tests marked slow (demo, kill, compile, DDP, FSDP): about half the time.
quick: lint test-notorch
	$(BIN)/python -m pytest -q -m "not slow"

# The analysis side works without torch: its tests again, in a venv without torch.
NOTORCH        := .venv-notorch
NOTORCH_EXTRAS := test,tensorboard,dask
NOTORCH_STAMP  := $(NOTORCH)/.installed-$(subst $(comma),-,$(NOTORCH_EXTRAS))
NOTORCH_TESTS := tests/core tests/analyzers tests/reports tests/recorders/test_csv_import.py \
                 tests/test_registry.py tests/test_engine_thresholds.py tests/test_config.py

$(NOTORCH_STAMP): pyproject.toml constraints.txt
	@test -x $(NOTORCH)/bin/python || $(PYTHON) -m venv $(NOTORCH)
	$(NOTORCH)/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$(NOTORCH_EXTRAS)]" $(QUIET_PIP)
	@if $(NOTORCH)/bin/python -c "import torch" 2>/dev/null; then \
	    echo "$(NOTORCH) holds torch: it must not"; exit 1; fi
	@rm -f $(NOTORCH)/.installed-*
	@touch $@

test-notorch: $(NOTORCH_STAMP)
	$(NOTORCH)/bin/python -m pytest -q -p no:cacheprovider $(NOTORCH_TESTS)

# The import layers (docs/architecture.md). import-linter reads packages from disk, and three of
# ours live outside tracelab/ (package-dir), so it reads the tree as a wheel would install it.
LAYERS := build/layers
lint: $(STAMP)
	@rm -rf $(LAYERS)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --target $(LAYERS) . $(QUIET_PIP)
	cd $(LAYERS) && PYTHONPATH=. ../../$(BIN)/lint-imports --config ../../pyproject.toml --no-cache

bench: $(STAMP)
	$(BIN)/python benchmarks/recorder_overhead.py
	$(BIN)/python benchmarks/analyze_scale.py
	$(BIN)/python benchmarks/batch_scale.py

clean:
	rm -rf $(VENV) $(NOTORCH) tracelab-demo build *.egg-info
