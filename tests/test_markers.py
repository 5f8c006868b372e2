"""Every test that needs the `neural` extra (torch, scikit-learn, ...) carries the marker `neural`
itself: tests/conftest.py registers the marker and adds it to no test, so a test renamed or moved
keeps its marker, and one that is not marked is named here. A test needs torch, by these rules,
when

- its module imports a neural module at its top (conftest.NEURAL_IMPORT), itself or through another
  tests module (conftest.neural_module): the module must set `pytestmark = pytest.mark.neural`, for
  it cannot even be imported without torch (a core install collects it as one placeholder);
- it uses the `toy` models (conftest's, or a module's own `toy`), directly or through another
  fixture (conftest's `work` is a copy of them);
- it imports a neural module in its body.

Tests that need torch only through a command, a recipe or the PRO tuner escape these rules: they
are marked by hand, next to their code (test_docs.NEURAL_DOCS names the docs whose blocks do).

The test modules are read, not imported (a fraction of a second for all of them), so every module
is checked whatever this session collected, in a core install too; and the tests this session
collected are checked against the same rules with the fixtures pytest resolved (all of them under
`make test`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.conftest import NEURAL_IMPORT, NeedsNeural, neural_module
from tests.test_docs import NEURAL_DOCS, markdown_files

TESTS = Path(__file__).resolve().parent
NEURAL_FIXTURES = {"toy", "tiny"}   # the toy models (conftest's `work` is a copy of them), the users' tiny models
NEURAL_MARK = re.compile(r"\bpytest\.mark\.neural\b")
NEURAL_PACKAGE = re.compile(r"""^\s*['"](?:torch|sklearn|sentencepiece|sacremoses)\b""")


def _marks_neural(node: ast.AST) -> bool:
    return bool(NEURAL_MARK.search(ast.unparse(node)))


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _fixture(node: ast.FunctionDef) -> tuple[str, bool] | None:
    """(its name, autouse) when `node` is a pytest fixture."""
    for dec in node.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        if ast.unparse(call.func if call else dec) in ("pytest.fixture", "fixture"):
            kw = {k.arg: k.value for k in call.keywords} if call else {}
            name = _string(kw.get("name")) or node.name
            autouse = ast.unparse(kw["autouse"]) == "True" if "autouse" in kw else False
            return name, autouse
    return None


def _arguments(node: ast.FunctionDef) -> list[str]:
    return [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]


def _parametrized(node: ast.FunctionDef) -> set[str]:
    """The argument names a direct `pytest.mark.parametrize` gives (not fixtures)."""
    names: set[str] = set()
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("mark.parametrize") and dec.args:
            indirect = any(k.arg == "indirect" for k in dec.keywords)
            first, text = dec.args[0], _string(dec.args[0])
            if text is not None and not indirect:
                names |= {n.strip() for n in text.split(",")}
            elif isinstance(first, (ast.List, ast.Tuple)) and not indirect:
                names |= {n for n in map(_string, first.elts) if n is not None}
    return names


def _usefixtures(node: ast.AST) -> list[str]:
    return [name for dec in getattr(node, "decorator_list", ()) if isinstance(dec, ast.Call)
            and ast.unparse(dec.func).endswith("mark.usefixtures") for name in map(_string, dec.args) if name]


@dataclass
class Module:
    path: Path
    fixtures: dict[str, ast.FunctionDef] = field(default_factory=dict)
    autouse: list[str] = field(default_factory=list)
    imported: dict[str, str] = field(default_factory=dict)   # a name -> the tests module it comes from
    tests: list[ast.FunctionDef] = field(default_factory=list)
    marked: bool = False          # pytestmark holds pytest.mark.neural
    skips_neural: list[str] = field(default_factory=list)   # pytest.importorskip of a neural package


@cache
def parse(path: Path) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = Module(path)
    for node in tree.body:
        source = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
        if isinstance(node, ast.ImportFrom) and source.startswith("tests."):
            module.imported.update({a.asname or a.name: source.split(".")[1] for a in node.names})
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            module.marked = _marks_neural(node.value)
        elif isinstance(node, ast.FunctionDef):
            fixture = _fixture(node)
            if fixture:
                module.fixtures[fixture[0]] = node
                if fixture[1]:
                    module.autouse.append(fixture[0])
            elif node.name.startswith("test"):
                module.tests.append(node)
    for call in ast.walk(tree):
        if (isinstance(call, ast.Call) and ast.unparse(call.func).endswith("importorskip") and call.args
                and NEURAL_PACKAGE.match(ast.unparse(call.args[0]))):
            module.skips_neural.append(f"{path.name}:{call.lineno}")
    return module


def _fixture_def(module: Module, name: str, seen: frozenset = frozenset()) -> ast.FunctionDef | None:
    """The fixture `name` as a test of `module` gets it: the module's own, one it imports from
    another tests module, or conftest's."""
    if name in module.fixtures:
        return module.fixtures[name]
    source = TESTS / f"{module.imported.get(name, '')}.py"
    if name in module.imported and source.is_file() and source not in seen:
        found = _fixture_def(parse(source), name, seen | {module.path})
        if found is not None:
            return found
    conftest = parse(TESTS / "conftest.py")
    return conftest.fixtures.get(name) if module.path != conftest.path else None


def fixture_closure(module: Module, test: ast.FunctionDef) -> set[str]:
    """Every fixture name the test requests, directly or through other fixtures (as pytest's
    `item.fixturenames`, without the built-in and plug-ins' fixtures' own requests)."""
    conftest = parse(TESTS / "conftest.py")
    todo = [n for n in _arguments(test) if n not in _parametrized(test)]
    todo += _usefixtures(test) + module.autouse + conftest.autouse
    closure: set[str] = set()
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        found = _fixture_def(module, name)
        if found is not None:
            todo += [n for n in _arguments(found) if n != "request"] + _usefixtures(found)
    return closure


def _imports_neural(test: ast.FunctionDef) -> bool:
    return any(NEURAL_IMPORT.search(ast.unparse(node)) for node in ast.walk(test)
               if isinstance(node, (ast.Import, ast.ImportFrom)))


def module_paths() -> list[Path]:
    return sorted(TESTS.glob("test_*.py"))


def unmarked(paths: list[Path]) -> list[str]:
    """The modules and tests that need torch by the rules and are not marked, each with its reason."""
    found = []
    for path in paths:
        module = parse(path)
        if neural_module(path):
            if not module.marked:
                found.append(f"{path.name}: imports a neural module at its top (itself or through a tests "
                             "module) and has no `pytestmark = pytest.mark.neural`")
            continue
        if module.marked:
            continue
        for test in module.tests:
            if any(_marks_neural(dec) for dec in test.decorator_list):
                continue
            uses = NEURAL_FIXTURES & fixture_closure(module, test)
            if uses:
                found.append(f"{path.name}::{test.name}: uses the fixture {', '.join(sorted(uses))} and has no "
                             "@pytest.mark.neural")
            elif _imports_neural(test):
                found.append(f"{path.name}::{test.name}: imports a neural module and has no @pytest.mark.neural")
    return found


def test_every_test_module_that_needs_torch_is_marked():
    missing = unmarked(module_paths())
    assert not missing, "need torch but are not marked neural:\n" + "\n".join(missing)


def test_the_rules_find_the_tests_that_need_torch():
    """The rules see the toy models through conftest's `work` and a module's own `toy`, and see
    an imported module's torch; a marked test or module passes."""
    conftest, lm = parse(TESTS / "conftest.py"), parse(TESTS / "test_lm_channel.py")
    uses_work, uses_toy = (ast.parse(f"def test_x({name}): pass").body[0] for name in ("work", "toy"))
    assert isinstance(uses_work, ast.FunctionDef) and isinstance(uses_toy, ast.FunctionDef)
    assert "toy" in fixture_closure(conftest, uses_work) and "toy" in fixture_closure(lm, uses_toy)
    outputs = TESTS / "test_bad_inputs_outputs.py"  # torch through tests.test_features
    assert neural_module(outputs) and not NEURAL_IMPORT.search(outputs.read_text(encoding="utf-8"))
    assert parse(outputs).marked


def test_the_session_tests_that_need_torch_are_marked(request):
    """The tests this session collected, with the fixtures pytest resolved for them."""
    neural: dict[Path, bool] = {}
    missing = []
    for item in request.session.items:
        if isinstance(item, NeedsNeural) or item.get_closest_marker("neural"):
            continue
        path = Path(str(item.path))
        if path not in neural:
            neural[path] = neural_module(path)
        uses = NEURAL_FIXTURES & set(getattr(item, "fixturenames", ()))
        if neural[path] or uses:
            missing.append(f"{item.nodeid}: " + (f"uses {', '.join(sorted(uses))}" if uses else "imports torch"))
    assert not missing, "need torch but are not marked neural:\n" + "\n".join(missing)


def test_no_test_skips_itself_when_torch_is_missing():
    """A test that needs torch is marked, never skipped in silence by pytest.importorskip."""
    skips = [where for path in module_paths() for where in parse(path).skips_neural]
    assert not skips, f"pytest.importorskip of a neural package (mark the test `neural` instead): {skips}"


def test_the_docs_marked_neural_exist():
    """A doc named in test_docs.NEURAL_DOCS that was renamed would leave its new name unmarked."""
    assert NEURAL_DOCS <= set(markdown_files()), NEURAL_DOCS - set(markdown_files())
