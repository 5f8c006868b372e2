"""The toy plug-ins (rerank_toy: an MBR utility, an n-best format and a metric), installed the way
a distribution is: this folder holds the package and its `rerank_toy-0.0.dist-info`, whose
entry_points.txt registers them, and a folder on the import path is all importlib.metadata needs
to find them. `toy_plugins` (a fixture) puts it on sys.path for in-process calls and on PYTHONPATH
for `rerank` subprocesses (`run_rerank`), renews every registry (rerank.plugins.load's cache), and
takes it all away after the test.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rerank import plugins

SITE = Path(__file__).resolve().parent


@pytest.fixture
def toy_plugins(monkeypatch):
    """The toy plug-ins installed for one test (in-process and in `rerank` subprocesses): SITE."""
    monkeypatch.syspath_prepend(str(SITE))   # also invalidates importlib's caches
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SITE), *filter(None, [os.environ.get("PYTHONPATH")])]))
    plugins.load.cache_clear()
    yield SITE
    plugins.load.cache_clear()   # the next registry use (sys.path restored by then) reads them without the toys


def run_rerank(*args, cwd=None) -> subprocess.CompletedProcess:
    """`rerank ARGS` in a subprocess (with the toy plug-ins while `toy_plugins` is active)."""
    return subprocess.run([sys.executable, "-m", "rerank", *map(str, args)], cwd=cwd, capture_output=True, text=True)
