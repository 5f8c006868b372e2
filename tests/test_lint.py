"""What `make lint` (ruff, mypy) relies on and cannot say itself; the linters themselves run in
`make lint`, not here, to keep the suite fast."""

import io
import re
import subprocess
import tokenize
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DIRECTIVE = re.compile(r"#\s*(?:ruff\s*:\s*)?noqa\b(?P<rest>.*)", re.IGNORECASE)
CODES = re.compile(r":\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*\b")
TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)")


def test_the_package_ships_its_type_hints():
    """rerank/py.typed (PEP 561) marks the package as typed, and the wheel carries it (package data;
    tests/test_architecture.py builds the wheel and finds it there)."""
    assert (ROOT / "rerank" / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["rerank"]


def test_every_suppression_names_its_rule():
    """Each noqa comment of the tracked Python files names the rules it silences (ruff's RUF100 then
    refuses one that names a rule not enforced, or one that silences nothing), and each mypy
    `type: ignore` its error codes: no blanket suppression hides a new problem on the same line."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    blanket = []
    for name in tracked.stdout.splitlines():
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
            if token.type != tokenize.COMMENT:
                continue
            noqa, ignore = DIRECTIVE.search(token.string), TYPE_IGNORE.search(token.string)
            if (noqa and not CODES.match(noqa["rest"])) or (ignore and not ignore["rest"].startswith("[")):
                blanket.append(f"{name}:{token.start[0]}: {token.string}")
    assert not blanket, "suppressions without a rule code:\n" + "\n".join(blanket)
