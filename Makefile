# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Extras the development environment installs; the library itself needs only the core list.
EXTRAS ?= torch,test,tensorboard,dask,lightning,hf
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: demo test lint venv bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$(EXTRAS)]"
	@rm -f $(VENV)/.installed-*
	@touch $@

demo: $(STAMP)
	$(BIN)/tracelab demo tracelab-demo

test: lint
	$(BIN)/python -m pytest -q

# The import layers (docs/architecture.md). import-linter reads packages from disk, and three of
# ours live outside tracelab/ (package-dir), so it reads the tree as a wheel would install it.
LAYERS := build/layers
lint: $(STAMP)
	@rm -rf $(LAYERS)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --target $(LAYERS) . 2>&1 | grep -v '^WARNING: Location' || true
	cd $(LAYERS) && PYTHONPATH=. ../../$(BIN)/lint-imports --config ../../pyproject.toml --no-cache

bench: $(STAMP)
	$(BIN)/python benchmarks/recorder_overhead.py
	$(BIN)/python benchmarks/analyze_scale.py
	$(BIN)/python benchmarks/batch_scale.py

clean:
	rm -rf $(VENV) tracelab-demo build *.egg-info
