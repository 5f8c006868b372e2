"""The commands are the API's callers (issue "The API is the only door"): a command module parses its
arguments, makes the API's config objects and calls the public API, `rerank` (rerank.api, loaded lazily
by name), with paths. It imports no core module but the public API, rerank.options, rerank.errors and
the command-line helpers, so it can neither read an input file nor check data the library does not.
"""

import ast
from pathlib import Path

import pytest

COMMANDS = Path(__file__).resolve().parent.parent / "rerank" / "commands"
# what a command module may import of the package: the API, the option declarations, the error type,
# and the command line's own helpers (flags, the parsed n-best input, the commands table)
ALLOWED = {"rerank", "rerank.options", "rerank.errors", "rerank.cliargs", "rerank.commands",
           "rerank.commands._common", "rerank.commands._evaluation"}
# the helpers themselves build flags from the format and plug-in tables; they read no input either
HELPER_ALLOWED = ALLOWED | {"rerank.formats", "rerank.plugins", "rerank.nbestfile"}


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a module of the package in `path` (`from rerank import X`
    is the API's X, or a module X of the package when rerank has a module X)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "rerank"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rerank":
            if node.module == "rerank":
                package = COMMANDS.parent
                found += [(node.lineno, f"rerank.{a.name}" if (package / f"{a.name}.py").exists()
                           or (package / a.name).is_dir() else "rerank") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("path", sorted(COMMANDS.glob("*.py")), ids=lambda p: p.name)
def test_a_command_imports_only_the_api_and_the_cli_helpers(path):
    allowed = HELPER_ALLOWED if path.name.startswith("_") else ALLOWED
    wrong = [f"{path.name}:{line}: {module}" for line, module in imported(path) if module not in allowed]
    assert wrong == [], "a command calls the public API (rerank.NAME), not the core's modules"


def test_the_check_sees_a_core_import():
    """The test's own reader: `from rerank.io import x` and `from rerank import plugins` are core modules."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        sample = Path(folder) / "x.py"
        sample.write_text("import rerank\nfrom rerank import plugins, tune\nfrom rerank.io import read_lines\n")
        assert [m for _, m in imported(sample)] == ["rerank", "rerank.plugins", "rerank", "rerank.io"]
