"""Library messages name the problem and the option by its Python name, never a command-line flag.

A script that calls the library has no flags: "give the source sentences (sources)" helps it,
"give --src" does not. The command line names its own flags (its help, and its own messages where
it passes an option on). This test reads the library modules' source (`ast`) and fails naming the
file:line of every `--flag` in the text of an exception, a log or warning call or a note.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("rerank", "mira", "embeddings", "nmt")   # recipes/ are pipelines with command lines: not library
# The command line: it may name its flags. rerank/mira, rerank/nmt, ... are links to the component folders
# (scanned as mira/, nmt/, ...).
COMMAND_LINE = {"rerank/cli.py", "rerank/cliargs.py", "rerank/__main__.py", "rerank/metrics/meteor/__main__.py",
                "embeddings/command.py", "embeddings/commands_extra.py", "nmt/command.py", "nmt/lm_command.py",
                "nmt/__main__.py"}
COMMAND_FOLDERS = ("rerank/commands/", "rerank/mira/", "rerank/embeddings/", "rerank/nmt/", "rerank/recipes/")
# file:line -> why that message must name a flag. Empty: no library message needs one.
ALLOWED: dict[str, str] = {}

FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "add_note"}
COLLECTIONS = ("notes", "hints", "problems", "warnings")   # lists of messages a reader reports
ADDS = {"append", "extend", "insert"}


def library_modules():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in COMMAND_LINE or name.startswith(COMMAND_FOLDERS):
                continue
            yield name, ast.parse(path.read_text(encoding="utf-8"))


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _receiver(call: ast.Call) -> str:
    value = call.func.value if isinstance(call.func, ast.Attribute) else None
    return value.attr if isinstance(value, ast.Attribute) else value.id if isinstance(value, ast.Name) else ""


def is_message(node: ast.AST) -> bool:
    """A raise, an exception or warning built, a log/warning call or a message added to a list of notes."""
    if isinstance(node, ast.Raise):
        return node.exc is not None
    if not isinstance(node, ast.Call):
        return False
    name = _callee(node)
    return (name in LOG_METHODS or name.endswith(("Error", "Exception", "Warning"))
            or (name in ADDS and _receiver(node).endswith(COLLECTIONS)))


def texts(node: ast.AST, assigned: dict[str, list[ast.AST]]):
    """The string constants of a message (f-strings' literal parts too), following a name to the
    values assigned to it in the same function (`message = f"..."; raise InputError(message)`)."""
    for part in ast.walk(node):
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            yield part
        elif isinstance(part, ast.Name) and isinstance(part.ctx, ast.Load):
            for value in assigned.get(part.id, ()):
                yield from (c for c in ast.walk(value) if isinstance(c, ast.Constant) and isinstance(c.value, str))


def assignments(scope: ast.AST) -> dict[str, list[ast.AST]]:
    found: dict[str, list[ast.AST]] = {}
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
    return found


def flags_in_messages(name: str, tree: ast.Module) -> list[str]:
    found = {}
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:
        assigned = assignments(scope) if scope is not tree else {}
        for node in ast.walk(scope):
            if not is_message(node):
                continue
            for text in texts(node, assigned):
                for flag in FLAG.findall(text.value):
                    where = f"{name}:{text.lineno}"
                    if where not in ALLOWED:
                        found[where, flag] = f"{where}: {flag} in {text.value[:80]!r}"
    return sorted(found.values())


def test_library_messages_name_no_command_line_flag():
    found = [line for name, tree in library_modules() for line in flags_in_messages(name, tree)]
    assert not found, "library messages naming a command-line flag (name the option's Python name):\n" + \
        "\n".join(found)


def test_the_check_finds_a_flag_in_each_kind_of_message():
    """The scan itself: a flag in a raise, a log call, a note and a message built beforehand is found;
    a flag in a help text or a docstring is not a message."""
    source = '''
def f(report, log, sources):
    """Read --src."""
    if not sources:
        raise InputError(f"no sources: give --src")
    log.warning("try --post-process")
    report.notes.append(f"{len(sources)} read; see --nbest-size")
    message = "use --tokenize none"
    raise ValueError(message)
HELP = ReadOption("src", "--src", "the sources (default: --src)")
'''
    found = flags_in_messages("x.py", ast.parse(source))
    assert [line.split(" in ")[0] for line in found] == ["x.py:5: --src", "x.py:6: --post-process",
                                                        "x.py:7: --nbest-size", "x.py:8: --tokenize"]


def test_the_allow_list_names_existing_messages():
    """An allowed file:line that no longer holds a flag is stale: the list stays honest."""
    for where in ALLOWED:
        name, line = where.rsplit(":", 1)
        assert FLAG.search((ROOT / name).read_text(encoding="utf-8").splitlines()[int(line) - 1]), where
