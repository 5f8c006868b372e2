# Two commands on a fresh machine:  `make demo` (the main job)  and  `make test` (the test suite).
# Both create .venv on first use with everything: the core, the `neural` extra (torch,
# scikit-learn) and the users'-model backends (transformers 5, CTranslate2, sentence-transformers:
# extras hf, ct2, st). torch is installed first from the pinned CPU wheel: a plain `torch` requirement
# with no torch installed would pull a multi-GB CUDA build. `make test-core` runs the core's tests
# in .venv-core, a venv without torch (`pip install -e '.[test]'`), as CI does.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CORE_VENV ?= .venv-core
COMPAT_VENV ?= .venv-compat
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo test test-core test-compat test-faults lint reproduce bench clean

# The C kernels (TER's rerank/metrics/_ter.c, MIRA's mira/_kbmira.c) are compiled by the editable
# install (`pip install -e`), so a change to one re-installs like a change to pyproject.toml does.
TER_C := rerank/metrics/_ter.c mira/_kbmira.c

# The last step indexes Meteor's paraphrase table (pycocoevalcap's) into the user's cache, so that
# the first METEOR run does not (about 15 s; it says so and succeeds when there is no table).
$(VENV)/.installed: pyproject.toml $(TER_C)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e '.[neural,hf,ct2,st,test]'
	$(PY) -m rerank.metrics.meteor
	touch $@

# The other side of the transformers version skew: with unbabel-comet (which needs transformers 4
# and numpy 1), pip resolves transformers 4.x and sentence-transformers 5.x.
$(COMPAT_VENV)/.installed: pyproject.toml $(TER_C)
	$(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install -q --upgrade pip
	$(COMPAT_VENV)/bin/python -m pip install -q $(TORCH_SPEC)
	$(COMPAT_VENV)/bin/python -m pip install -q -e '.[neural,ct2,st,comet,test]'
	touch $@

$(CORE_VENV)/.installed: pyproject.toml $(TER_C)
	$(PYTHON) -m venv $(CORE_VENV)
	$(CORE_VENV)/bin/python -m pip install -q --upgrade pip
	$(CORE_VENV)/bin/python -m pip install -q -e '.[test]'
	@if $(CORE_VENV)/bin/python -c "import torch" 2> /dev/null; then echo "$(CORE_VENV) has torch"; exit 1; fi
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/rerank demo

# The suite on every core (pytest-xdist; TEST_WORKERS=0 runs it in one process). Each worker takes
# whole test modules (--dist loadfile), so a module's fixtures (trained toy models, statistics) are
# built once. PYTEST_ADDOPTS adds options (.ci/run selects the tests that need torch with it).
TEST_WORKERS ?= auto
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist loadfile
test: $(VENV)/.installed
	$(PY) -m pytest -q $(PYTEST_PARALLEL) tests

# The core without torch or scikit-learn: the tests marked `neural` (each test module marks its own;
# tests/test_markers.py fails on a test that needs torch and is not marked) are deselected, and
# tests/conftest.py counts and names them in the summary.
test-core: $(CORE_VENV)/.installed
	$(CORE_VENV)/bin/python -m pytest -q $(PYTEST_PARALLEL) -m "not neural" tests

# The fault suite alone: the tests marked `faults` (a full disk, SIGTERM/SIGINT/SIGHUP mid-write, kill -9
# during a write or a cache write, two writers of one output; docs/architecture.md's "Guarantees").
test-faults: $(VENV)/.installed
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m faults tests

# The users'-model backends under transformers 4 (and the COMET qe feature, which needs it), and
# models saved by each transformers major scored under the other (tests/cross_version.py).
test-compat: $(VENV)/.installed $(COMPAT_VENV)/.installed
	$(COMPAT_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_model_backends.py tests/test_metricx.py tests/test_bleurt_port.py $(wildcard tests/test_comet_qe.py tests/test_comet_ref.py tests/test_mbr_comet.py)
	rm -rf build/cross-version && mkdir -p build/cross-version
	$(PY) tests/cross_version.py build build/cross-version/new
	$(COMPAT_VENV)/bin/python tests/cross_version.py build build/cross-version/old
	$(COMPAT_VENV)/bin/python tests/cross_version.py check build/cross-version/new
	$(PY) tests/cross_version.py check build/cross-version/old

# The one-way import layers (import-linter contracts in pyproject.toml; rerank/mira, rerank/nmt, ...
# are links to the component folders, so the linter, which follows them, sees the one package), ruff
# over the repository and mypy on the package `rerank`, both configured in pyproject.toml.
lint: $(VENV)/.installed
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Every model, list, table and figure of docs/results from the data (about seven and a half hours on two
# CPU cores; resumable: run it again after a stop). DATA is the data root (multi30k/, sts/).
DATA ?= ../shared/data
REPRODUCE_OUT ?= runs/reproduce
reproduce: $(VENV)/.installed
	$(VENV)/bin/rerank recipe reproduce --data-dir $(DATA) --out $(REPRODUCE_OUT) --publish

clean:
	rm -rf $(VENV) $(CORE_VENV) $(COMPAT_VENV) build *.egg-info
