"""What `make lint` (ruff, mypy) relies on and cannot say itself; the linters themselves run in
`make lint`, not here, to keep the suite fast. (A `# noqa` or `# type: ignore` without its rule
codes is ruff's PGH004 / PGH003, selected in pyproject.toml.)"""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_ships_its_type_hints():
    """rerank/py.typed (PEP 561) marks the package as typed, and the wheel carries it (package data;
    tests/test_architecture.py builds the wheel and finds it there)."""
    assert (ROOT / "rerank" / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["rerank"]


def _typed_modules() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [module for override in config["tool"]["mypy"]["overrides"] if override.get("disallow_untyped_defs")
            for module in override["module"]]


def _unannotated(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of every function that mypy's disallow_untyped_defs refuses: a parameter (but
    a method's self/cls) or the return without a type (`__init__` may omit `-> None` when a
    parameter is typed)."""
    found = []

    def visit(node: ast.AST, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = child.args
                params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in child.decorator_list)
                if in_class and not static and params:
                    params = params[1:]   # self or cls
                params += [a for a in (args.vararg, args.kwarg) if a is not None]
                typed_params = all(p.annotation is not None for p in params)
                init_ok = child.name == "__init__" and params and typed_params
                if not typed_params or (child.returns is None and not init_ok):
                    found.append((child.lineno, child.name))
                visit(child, False)
            else:
                visit(child, isinstance(child, ast.ClassDef))

    visit(tree, False)
    return found


def test_the_typed_modules_exist_and_annotate_every_function():
    """The modules pyproject.toml lists under disallow_untyped_defs (`make lint`'s mypy refuses an
    untyped function there) exist and annotate every function: the list stays honest without a mypy
    run in the suite."""
    missing, untyped = [], []
    for module in _typed_modules():
        parts = module.split(".")
        path = ROOT.joinpath(*parts).with_suffix(".py")
        if not path.exists():
            path = ROOT.joinpath(*parts, "__init__.py")
        if not path.exists():
            missing.append(module)
            continue
        untyped += [f"{path.relative_to(ROOT)}:{line} {name}"
                    for line, name in _unannotated(ast.parse(path.read_text(encoding="utf-8")))]
    assert not missing, f"listed under disallow_untyped_defs in pyproject.toml but not a module: {missing}"
    assert not untyped, "functions without annotations in a typed module:\n" + "\n".join(untyped)
