# Two commands on a fresh machine:  `make demo` (the main job)  and  `make test` (the test suite).
# Both create .venv on first use with everything: the core and the `neural` extra (torch,
# scikit-learn). torch is installed first from the pinned CPU wheel: a plain `torch` requirement
# with no torch installed would pull a multi-GB CUDA build. `make test-core` runs the core's tests
# in .venv-core, a venv without torch (`pip install -e '.[test]'`), as CI does.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CORE_VENV ?= .venv-core
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo test test-core lint reproduce bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e '.[neural,test]'
	touch $@

$(CORE_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(CORE_VENV)
	$(CORE_VENV)/bin/python -m pip install -q --upgrade pip
	$(CORE_VENV)/bin/python -m pip install -q -e '.[test]'
	@if $(CORE_VENV)/bin/python -c "import torch" 2> /dev/null; then echo "$(CORE_VENV) has torch"; exit 1; fi
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/rerank demo

test: $(VENV)/.installed
	$(PY) -m pytest -q tests

# The core without torch or scikit-learn: the tests marked `neural` (tests/conftest.py) are
# deselected, and counted and named in the summary.
test-core: $(CORE_VENV)/.installed
	$(CORE_VENV)/bin/python -m pytest -q -m "not neural" tests

# The one-way import layers (import-linter contracts in pyproject.toml). rerank/mira, rerank/nmt, ...
# are links to the component folders, so the linter (which follows them) sees the one package.
lint: $(VENV)/.installed
	$(VENV)/bin/lint-imports

# Every model, list, table and figure of docs/results from the data (about seven and a half hours on two
# CPU cores; resumable: run it again after a stop). DATA is the data root (multi30k/, sts/).
DATA ?= ../shared/data
REPRODUCE_OUT ?= runs/reproduce
reproduce: $(VENV)/.installed
	$(VENV)/bin/rerank recipe reproduce --data-dir $(DATA) --out $(REPRODUCE_OUT) --publish

clean:
	rm -rf $(VENV) $(CORE_VENV) build *.egg-info
