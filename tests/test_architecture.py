"""The house rules of docs/architecture.md: one-way imports, functions and files that fit on a screen."""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rerank", "mira", "embeddings", "nmt", "recipes", "benchmarks", "tests")  # folders of this repository
MAX_FUNCTION_LINES, MAX_FILE_LINES = 60, 400
COMPONENTS = ("mira", "embeddings", "nmt", "recipes")


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
    """import-linter's contracts, as `make lint` and a plain `lint-imports` in the repository run
    them (rerank/mira, rerank/nmt, ... are links to the component folders, which the linter follows)."""
    linter = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if linter is None:
        pytest.fail("import-linter is not installed (pip install -e '.[test]')")
    result = subprocess.run([linter], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_packages_and_contracts_name_every_module():
    """pyproject.toml lists the packages of the one import package and the core modules of the
    layer contract by hand: every folder with Python files, and every core module, is named there."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = set()
    for name, path in config["tool"]["setuptools"]["package-dir"].items():
        folder = ROOT / path
        for init in folder.rglob("__init__.py"):
            packages.add(".".join([name, *init.parent.relative_to(folder).parts]))
    assert packages <= set(config["tool"]["setuptools"]["packages"]), packages - set(config["tool"]["setuptools"]["packages"])
    core = {p.stem for p in (ROOT / "rerank").glob("*.py") if p.stem not in ("__init__", "__main__")}
    core |= {p.name for p in (ROOT / "rerank").iterdir()
             if p.is_dir() and not p.is_symlink() and (p / "__init__.py").exists()}
    links = {p.name: os.readlink(p) for p in (ROOT / "rerank").iterdir() if p.is_symlink()}
    assert links == {c: f"../{c}" for c in COMPONENTS}, links  # the components, linked into the one package
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("The core"))
    assert {f"rerank.{m}" for m in core} == set(contract["source_modules"])


def test_the_core_names_no_component():
    """rerank/ (the core's folder) never imports rerank.mira, rerank.embeddings, rerank.nmt or
    rerank.recipes, not even lazily inside a function."""
    found = []
    for path in sorted((ROOT / "rerank").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                      if n.split(".")[0] in COMPONENTS or n.split(".")[:2] in [["rerank", c] for c in COMPONENTS]]
    assert not found, "\n".join(found)


def test_gitignore_keeps_every_project_entry_of_the_root():
    """.gitignore ignores every entry of the repository root but the project's own (outputs of the
    docs' examples land there): each tracked top-level file or folder is on its list."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    top = sorted({line.split("/")[0] + ("/" if "/" in line else "") for line in tracked.stdout.splitlines()})
    done = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(top),
                          capture_output=True, text=True)
    assert not done.stdout.split(), f"tracked but ignored: {done.stdout.split()}"


def test_the_wheel_installs_one_import_package(tmp_path):
    """The built wheel holds one top-level import package, `rerank` (the component folders inside
    it), and nothing under another project's name: embeddings, mira, nmt and recipes are each a
    project on the package index."""
    import zipfile

    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    wheel = next(tmp_path.glob("mlmme_rerank-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"rerank"}, top
    assert "rerank/py.typed" in names  # PEP 561: the package's type hints are for its users too
    for component in COMPONENTS:
        assert f"rerank/{component}/__init__.py" in names, component


def package_modules() -> set[str]:
    """Every .py file of the package's folders: rerank/ (the core; its links to the component folders
    left out) and the component folders mira/, embeddings/, nmt/, recipes/."""
    found = set()
    for folder in ("rerank", *COMPONENTS):
        for path in (ROOT / folder).rglob("*.py"):
            name = path.relative_to(ROOT).as_posix()
            if folder == "rerank" and name.split("/")[1] in COMPONENTS:
                continue
            found.add(name)
    return found


def documented_modules() -> list[str]:
    """The modules of docs/architecture.md's "Modules" section: the first cell of each table row."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w/.]+\.py)` \|", section, flags=re.M)


def test_the_architecture_doc_lists_every_module():
    """docs/architecture.md gives every module its one-line role, grouped by floor: a new module
    is missing there until it is described, and a moved or removed one is listed no longer."""
    listed = documented_modules()
    modules = package_modules()
    missing = sorted(modules - set(listed))
    gone = sorted(set(listed) - modules)
    twice = sorted({m for m in listed if listed.count(m) > 1})
    assert not (missing or gone or twice), (f"not in docs/architecture.md's Modules section: {missing}; "
                                            f"listed there but not a module: {gone}; listed twice: {twice}")


MAX_PARAMETERS = 10


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's parameters as the rule counts them: self or cls left out, *args and **kwargs one each."""
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    count = len(positional) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return count - int(bool(positional) and positional[0].arg in ("self", "cls"))


def test_no_function_of_the_core_or_a_component_takes_more_than_ten_parameters():
    """Issue 45 item 4: no function of the core (rerank/) or of a component (mira/, embeddings/,
    nmt/) takes more than ten parameters, nested functions and methods included; options that
    belong together travel as one config object (a dataclass: MBROptions, PoolOptions, ...)."""
    found = []
    for name in sorted(m for m in package_modules() if m.split("/")[0] != "recipes"):
        for node in ast.walk(ast.parse((ROOT / name).read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameter_count(node) > MAX_PARAMETERS:
                found.append(f"{name}:{node.lineno} {node.name}: {parameter_count(node)} parameters")
    assert not found, f"more than {MAX_PARAMETERS} parameters:\n" + "\n".join(found)
