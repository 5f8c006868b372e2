"""What `make lint` (ruff, mypy) relies on and cannot say itself; the linters themselves run in
`make lint`, not here, to keep the suite fast. (A `# noqa` or `# type: ignore` without its rule
codes is ruff's PGH004 / PGH003, selected in pyproject.toml.)"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_ships_its_type_hints():
    """rerank/py.typed (PEP 561) marks the package as typed, and the wheel carries it (package data;
    tests/test_architecture.py builds the wheel and finds it there)."""
    assert (ROOT / "rerank" / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["rerank"]
