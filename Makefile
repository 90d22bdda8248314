# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Extras the development environment installs; the library itself needs only the core list.
EXTRAS ?= torch,test,tensorboard,dask,lightning,hf
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: demo test venv bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$(EXTRAS)]"
	@rm -f $(VENV)/.installed-*
	@touch $@

demo: $(STAMP)
	$(BIN)/tracelab demo tracelab-demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/recorder_overhead.py
	$(BIN)/python benchmarks/analyze_scale.py
	$(BIN)/python benchmarks/batch_scale.py

clean:
	rm -rf $(VENV) tracelab-demo build *.egg-info
