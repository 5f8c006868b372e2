"""Test-wide settings and the `neural` and `faults` markers.

One torch thread, so the suite's speed does not collapse when other processes share the cores
(torch's OpenMP threads spin when oversubscribed).

Tests that need the `neural` extra (torch, scikit-learn, ...) carry the marker `neural` in their
own module: `pytestmark = pytest.mark.neural` where every test of the module needs it,
`@pytest.mark.neural` on a test, `pytest.param(..., marks=pytest.mark.neural)` on a case. This
file registers the marker and adds it to no test; tests/test_markers.py fails naming a test that
needs torch by its imports (neural_module: NEURAL_IMPORT at the module's top, itself or through
another tests module) or the `toy` models, and is not marked. A core install (no torch) runs
`pytest -m "not neural"`: the marked tests are deselected, counted and named in the summary, never
skipped in silence. A module that imports torch (neural_module) cannot even be collected there:
it is collected as one placeholder test, marked neural, that fails with the install line when run
without the marker's deselection.

The marker `faults` names the fault suite (a full disk, SIGTERM/SIGINT/SIGHUP mid-write, kill -9
during a write or a cache write, two writers of one output), marked in its modules as `neural` is;
docs/architecture.md's "Guarantees" lists what each of its tests holds.
"""

import gzip
import importlib.util
import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from rerank.errors import install_line
from rerank.io import read_lines

INSTALL_NEURAL = install_line("torch")  # the pip command of the neural extra

# Caches the library writes (the METEOR paraphrase index, ~80 MB for English) go to build/test-cache
# in the repository (ignored by git), not to the user's ~/.cache; a later run reuses them.
os.environ["XDG_CACHE_HOME"] = str(Path(__file__).resolve().parent.parent / "build" / "test-cache")

# No test measures time (a loaded machine makes every test slower, none fail): Hypothesis's
# properties have no deadline per example, and no health check that fails when drawing the
# examples is slow (HealthCheck.too_slow; a test that lists its own suppressed checks lists it too).
settings.register_profile("untimed", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("untimed")

HAVE_NEURAL = all(importlib.util.find_spec(m) is not None for m in ("torch", "sklearn"))
if HAVE_NEURAL:
    import torch

    torch.set_num_threads(1)

PACKAGE_DATA = Path(__file__).parent.parent / "rerank" / "data" / "multi30k"
# A module that imports one of these at its top, itself or through another tests module
# (neural_module), cannot be imported without the neural extra: the rule of the placeholder below and
# of tests/test_markers.py, which checks that such a module is marked.
NEURAL_IMPORT = re.compile(r"^(?:import|from)\s+(?:torch|sklearn|sentencepiece|sacremoses|rerank\.embeddings|"
                           r"rerank\.nmt|tests\.edges_helpers)\b", re.MULTILINE)
_deselected: list[str] = []


def pytest_configure(config):
    config.addinivalue_line("markers", f"neural: needs the neural extra (torch, scikit-learn): {INSTALL_NEURAL}")
    config.addinivalue_line("markers", "faults: the fault suite (full disks, signals, kills, concurrent writers; "
                            "docs/architecture.md's Guarantees): `pytest -m faults`, `make test-faults`")


TESTS_IMPORT = re.compile(r"^(?:from|import)\s+tests\.(\w+)", re.MULTILINE)


def neural_module(path: Path, seen: frozenset = frozenset()) -> bool:
    """The module imports a neural module at its top, itself or through another tests module."""
    if path.suffix != ".py" or not path.is_file() or path in seen:
        return False
    text = path.read_text(encoding="utf-8")
    return bool(NEURAL_IMPORT.search(text)) or any(
        neural_module(path.parent / f"{name}.py", seen | {path}) for name in TESTS_IMPORT.findall(text))


class NeedsNeural(pytest.Item):
    """Stands for a test module that cannot be imported without torch."""

    def runtest(self):
        pytest.fail(f"{self.path.name} needs the neural extra (torch): {INSTALL_NEURAL}, or deselect it "
                    "with -m 'not neural'", pytrace=False)

    def reportinfo(self):
        return self.path, None, f"{self.path.name} (needs torch)"


class NeuralModule(pytest.File):
    def collect(self):
        item = NeedsNeural.from_parent(self, name="needs-neural")
        item.add_marker(pytest.mark.neural)
        yield item


def pytest_pycollect_makemodule(module_path, parent):
    if not HAVE_NEURAL and module_path.name.startswith("test_") and neural_module(module_path):
        return NeuralModule.from_parent(parent, path=module_path)
    return None


# The slowest modules (pytest --durations, summed per module; the docs test about a third of the
# suite), run first: pytest-xdist hands whole modules to the workers in collection order, and the
# longest first keeps one worker from starting a long module while the other has finished.
SLOW_FIRST = ("test_docs.py", "test_torchrun_features.py", "test_recipe.py", "test_multiref.py",
              "test_embeddings_images.py", "test_embeddings_train.py", "test_roundtrip_properties.py",
              "test_calibration.py", "test_demo.py", "test_gpu_check.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(SLOW_FIRST)))   # stable


def pytest_deselected(items):
    """The tests a marker expression naming `neural` deselected (`-m "not neural"`), for the summary;
    not those another expression or `-k` left out (`-m faults` deselects the neural tests too, and
    they need nothing to be installed)."""
    if items and "neural" in (items[0].config.getoption("markexpr") or ""):
        _deselected.extend(item.nodeid for item in items if item.get_closest_marker("neural"))


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands the tests it deselected to the controller, which writes the summary."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["neural_deselected"] = list(_deselected)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """(pytest-xdist's controller) Every worker collects and deselects the whole suite: one worker's list."""
    if not _deselected:
        _deselected.extend(getattr(node, "workeroutput", {}).get("neural_deselected", []))


# Test modules of a backend that cannot share the environment of the others: unbabel-comet needs
# transformers 4 and numpy 1, .venv has transformers 5 (`make test-compat` runs them in .venv-compat).
# Where the backend is missing they are not collected, and the summary names them.
OTHER_ENVIRONMENT = {"test_comet_qe.py": ("comet", "make test-compat"), "test_comet_ref.py": ("comet", "make test-compat"),
                     "test_mbr_comet.py": ("comet", "make test-compat")}
collect_ignore = [name for name, (module, _) in OTHER_ENVIRONMENT.items()
                  if HAVE_NEURAL and importlib.util.find_spec(module) is None]


def pytest_terminal_summary(terminalreporter):
    """How many tests the `neural` marker deselected, by module: a module that imports torch counts
    as one (it cannot be collected without torch), every other test as itself; and the modules left
    to another environment (OTHER_ENVIRONMENT)."""
    for name in collect_ignore:
        module, where = OTHER_ENVIRONMENT[name]
        terminalreporter.write_line(f"not collected here: {name} needs {module}, which this environment lacks; "
                                    f"`{where}` runs it")
    if _deselected:
        modules: dict[str, int] = {}
        for nodeid in _deselected:
            modules[Path(nodeid.split("::")[0]).name] = modules.get(Path(nodeid.split("::")[0]).name, 0) + 1
        uncollected = sum(1 for nodeid in _deselected if nodeid.endswith("::needs-neural"))
        terminalreporter.write_line(
            f"neural: {len(_deselected)} deselected ({uncollected} whole modules that import torch, not collected, "
            f"and {len(_deselected) - uncollected} tests), they need {INSTALL_NEURAL}: "
            + ", ".join(f"{name} ({count})" for name, count in sorted(modules.items())))


@pytest.fixture(scope="session")
def toy(tmp_path_factory):
    """Toy data and tiny trained embedding, NMT and LM models (tests.edges_helpers), once per test
    process; read only (a test that changes files works on `work`, its own copy). A test module may
    define its own `toy`."""
    from tests.edges_helpers import train_runs, write_toy_data

    d = tmp_path_factory.mktemp("toy")
    write_toy_data(d)
    train_runs(d)
    return d


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny users' models of rerank.recipes.tiny_models (a Marian and its CTranslate2 conversion,
    a GPT-2 and its conversion, a sentence-transformers encoder; random weights), once per test
    process; read only. {name: directory}."""
    from rerank.recipes import tiny_models

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return tiny_models.build_all(str(tmp_path_factory.mktemp("tiny")))


@pytest.fixture
def work(toy, tmp_path):
    """A private copy of the toy data and models (tests corrupt them)."""
    shutil.copytree(toy, tmp_path / "w")
    return tmp_path / "w"


def _write(path: Path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


@pytest.fixture(scope="session")
def mini_multi30k(tmp_path_factory):
    """80 train / 20 val / 20 test sentences cut from the shipped val and test_2016 text."""
    root = tmp_path_factory.mktemp("m30k")
    val = {lang: read_lines(str(PACKAGE_DATA / f"val.{lang}.gz")) for lang in ("en", "de")}
    test = {lang: read_lines(str(PACKAGE_DATA / f"test_2016_flickr.{lang}.gz")) for lang in ("en", "de")}
    splits = {"train": {k: v[:80] for k, v in val.items()}, "val": {k: v[80:100] for k, v in val.items()},
              "test_2016_flickr": {k: v[:20] for k, v in test.items()}}
    for split, text in splits.items():
        n = len(text["en"])
        task2 = "test_2016" if split == "test_2016_flickr" else split
        images = [f"{split}-{i}.jpg" for i in range(n)]
        (root / "task1" / "image_splits").mkdir(parents=True, exist_ok=True)
        (root / "task2" / "image_splits").mkdir(parents=True, exist_ok=True)
        (root / "task1" / "image_splits" / f"{split}.txt").write_text("\n".join(images) + "\n")
        (root / "task2" / "image_splits" / f"{task2}_images.txt").write_text("\n".join(images) + "\n")
        for lang, lines in text.items():
            _write(root / "task1" / "raw" / f"{split}.{lang}.gz", lines)
            for k in range(1, 6):  # comparable captions: the same sentences, rotated
                _write(root / "task2" / "raw" / f"{task2}.{k}.{lang}.gz", lines[k:] + lines[:k])
    return root
