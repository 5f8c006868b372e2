"""Commands start fast: the command line loads the command that runs and what it needs, nothing more.

- rerank.commands.COMMANDS, the table the command line lists and dispatches by, is this
  distribution's `rerank.commands` entry points (pyproject.toml), and each module's own parser
  has the table's name and one-line help;
- `rerank --help` lists every command with that help without importing any command module
  or numpy; `rerank CMD --help` imports no other command's module; neither imports torch,
  sacremoses, matplotlib, pandas, scipy or scikit-learn (each in a fresh interpreter);
- `rerank eval` with BLEU and TER runs without any of them either.
(benchmarks/bench_startup.py measures the times; these tests pin the property, not a timing.)
"""

import argparse
import gzip
import importlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rerank.commands import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "sacremoses", "matplotlib", "pandas", "scipy", "sklearn", "transformers", "sentencepiece")
REF = ROOT / "rerank" / "data" / "multi30k" / "test_2016_flickr.de.gz"

PROBE = """
import json, sys
from rerank.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as exc:
    status = exc.code
print("MODULES=" + json.dumps(sorted(sys.modules)))
sys.exit(status)
"""


def run_fresh(*args) -> tuple[subprocess.CompletedProcess, set[str]]:
    """`rerank ARGS` in a fresh interpreter: the result and the modules it had loaded at the end."""
    result = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    text, _, modules = result.stdout.rpartition("MODULES=")
    return subprocess.CompletedProcess(result.args, 0, text, result.stderr), set(json.loads(modules))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def command_modules(modules: set[str], but: str | None = None) -> list[str]:
    """The modules of this distribution's commands (the table's) that are loaded, but `but`'s."""
    return sorted(name for name, (value, _) in COMMANDS.items() if value.split(":")[0] in modules and name != but)


def test_the_table_is_the_distributions_entry_points():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    entry_points = declared["project"]["entry-points"]["rerank.commands"]
    assert {name: value for name, (value, _) in COMMANDS.items()} == entry_points


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_module_builds_the_tables_command(name):
    module, _, attribute = COMMANDS[name][0].partition(":")
    subparsers = argparse.ArgumentParser(prog="rerank").add_subparsers(dest="command")
    getattr(importlib.import_module(module), attribute)(subparsers)
    assert list(subparsers.choices) == [name]
    assert [a.help for a in subparsers._choices_actions] == [COMMANDS[name][1]]


def test_help_lists_every_command_and_imports_none_of_them():
    result, modules = run_fresh("--help")
    listed = " ".join(result.stdout.split())
    for name, (_, help_line) in COMMANDS.items():
        assert f"{name} {' '.join(help_line.split())}" in listed, name
    assert command_modules(modules) == [] and heavy(modules) == [] and "numpy" not in modules


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_help_loads_that_command_alone(name):
    result, modules = run_fresh(name, "--help")
    assert result.stdout.startswith(f"usage: rerank {name} ")
    assert command_modules(modules, but=name) == [] and heavy(modules) == []


def test_eval_with_bleu_and_ter_loads_no_model_library(tmp_path):
    ref = gzip.decompress(REF.read_bytes()).decode("utf-8").splitlines()[:30]
    (tmp_path / "ref").write_text("\n".join(ref) + "\n", encoding="utf-8")
    (tmp_path / "a").write_text("\n".join(s.lower() for s in ref) + "\n", encoding="utf-8")
    (tmp_path / "b").write_text("\n".join(" ".join(s.split()[:-1]) for s in ref) + "\n", encoding="utf-8")
    result, modules = run_fresh("eval", "-r", tmp_path / "ref", "-b", tmp_path / "a", tmp_path / "b",
                                "--metrics", "bleu,ter", "--ar", "100", "--bootstrap", "100")
    assert "TER" in result.stdout
    assert heavy(modules) == [] and command_modules(modules, but="eval") == []


@pytest.mark.neural
def test_the_s_s_feature_loads_nothing_heavy_and_torch_only_when_asked(tmp_path):
    """`features -m`: the numpy encoder, no torch; torch for `--mlmme-backend torch` alone; the tokeniser
    reads sacremoses' data without importing it."""
    nbest = ROOT / "rerank" / "data" / "multi30k" / "optimised.test_2016.20best.gz"
    src = ROOT / "rerank" / "data" / "multi30k" / "test_2016_flickr.en.gz"
    lines = gzip.decompress(nbest.read_bytes()).decode("utf-8").splitlines()
    (tmp_path / "in.nbest").write_text("\n".join(x for x in lines if x.split(" |||")[0] in ("0", "1")) + "\n",
                                       encoding="utf-8")
    (tmp_path / "src").write_text("\n".join(gzip.decompress(src.read_bytes()).decode("utf-8").splitlines()[:2]) + "\n",
                                  encoding="utf-8")
    for backend, loaded in (("auto", set()), ("torch", {"torch"})):
        _, modules = run_fresh("features", tmp_path / "in.nbest", "--src", tmp_path / "src", "-m",
                               ROOT / "rerank" / "data" / "models" / "mlmme-small.pt", "--mlmme-backend", backend,
                               "--quiet", "-o", tmp_path / f"out.{backend}")
        assert (tmp_path / f"out.{backend}").exists()
        assert {m.split(".")[0] for m in heavy(modules)} == loaded
