"""The house rules of docs/architecture.md: one-way imports, functions and files that fit on a screen."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rerank", "mira", "embeddings", "nmt", "recipes", "benchmarks", "tests")
MAX_FUNCTION_LINES, MAX_FILE_LINES = 60, 400


def sources():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def test_functions_fit_on_a_screen_and_files_on_a_few():
    """A guide, not a rule: a function is as long as its idea needs, and splitting one idea into
    fragments to meet a count is worse than a long function. Long ones are reported as a warning
    (pytest's summary lists them) so that a reviewer looks, never as a failure."""
    too_long = []
    for path in sources():
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT)
        if text.count("\n") > MAX_FILE_LINES:
            too_long.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    if too_long:
        import warnings

        warnings.warn("longer than a screen (functions) or a few (files); worth a look:\n" + "\n".join(too_long),
                      stacklevel=1)


def test_imports_run_one_way():
    linter = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if linter is None:
        pytest.fail("import-linter is not installed (pip install -e '.[test]')")
    result = subprocess.run([linter], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_core_names_no_component():
    """rerank/ never imports mira, embeddings, nmt or recipes, not even lazily inside a function."""
    found = []
    for path in sorted((ROOT / "rerank").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                      if n.split(".")[0] in ("mira", "embeddings", "nmt", "recipes")]
    assert not found, "\n".join(found)
