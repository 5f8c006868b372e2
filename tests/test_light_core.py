"""The light core and the library's manners.

- Without the `neural` extra (torch and scikit-learn simulated missing by a meta-path blocker in a
  subprocess, or really missing in a core venv): `import rerank` and `rerank --help` load neither,
  the core commands work, and a command, feature or tuner that needs them stops with one line
  naming the install command, exit status 2.
- The feature and tuner plug-ins take typed options (a dataclass per plug-in), the same from a
  script as from the command line.
- Library modules print nothing and draw no tqdm bar (the command line does), and the errors of
  the plug-ins' library code name no command-line flag.
"""

import ast
import json
import os
import subprocess
import sys
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest

from rerank.consensus import MBRFeature, MBROptions
from rerank.errors import InputError, MissingDependency, needs_neural
from rerank.features import FeatureContext, make_options
from rerank.formats import read_nbest
from rerank.progress import progress_bar, track

ROOT = Path(__file__).resolve().parent.parent
JOSHUA = ROOT / "rerank" / "data" / "examples" / "joshua-bn-en.10"
NEURAL = ("torch", "torchvision", "sklearn", "sentencepiece", "sacremoses")
INSTALL_NEURAL = "pip install 'mlmme-rerank[neural]'"  # what a missing torch tells the user to run

# A finder at the head of sys.meta_path that refuses the neural modules, as a venv without them would.
BLOCKER = f"""
import sys
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {NEURAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Missing())
"""


def without_neural(code: str, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + code, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONSAFEPATH": "1"})


def rerank_without_neural(*args, cwd=None) -> subprocess.CompletedProcess:
    return without_neural("from rerank.cli import main; raise SystemExit(main(sys.argv[1:]))", *args, cwd=cwd)


def test_import_and_help_load_no_torch_and_no_sklearn():
    code = ("import rerank, rerank.cli\nrerank.cli.build_parser()\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {NEURAL!r}))")
    result = without_neural(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    result = rerank_without_neural("--help")
    assert result.returncode == 0, result.stderr
    for command in ("info", "convert", "add-feature", "features", "tune", "apply", "oracle", "eval", "report",
                    "embed", "nmt", "lm", "demo"):
        assert command in result.stdout


def test_the_core_commands_run_without_torch(tmp_path):
    nbest, refs = f"{JOSHUA}.nbest", [f"{JOSHUA}.ref.{k}" for k in range(4)]
    ref_args = [x for r in refs for x in ("-r", r)]
    steps = [
        ["info", nbest],
        ["convert", nbest, "-o", tmp_path / "moses.nbest", "--to", "moses"],
        ["features", tmp_path / "moses.nbest", "--which", "mbr", "-o", tmp_path / "mbr.nbest"],
        ["tune", tmp_path / "mbr.nbest", *ref_args, "--tokenize", "none", "--tuner", "mira", "--epochs", "3",
         "-o", tmp_path / "w.json"],
        ["tune", tmp_path / "mbr.nbest", *ref_args, "--tokenize", "none", "--tuner", "mert", "--restarts", "2",
         "-o", tmp_path / "w-mert.json"],
        ["apply", tmp_path / "mbr.nbest", "-w", tmp_path / "w.json", "-o", tmp_path / "best.txt"],
        ["oracle", tmp_path / "mbr.nbest", "--tokenize", "none", *ref_args, "-o", tmp_path / "oracle.txt"],
        ["eval", "--tokenize", "none", *ref_args, "-b", tmp_path / "oracle.txt", tmp_path / "best.txt",
         "--metrics", "bleu,ter", "--ar", "50", "--bootstrap", "0", "-o", tmp_path / "res.md"],
    ]
    for step in steps:
        result = rerank_without_neural(*step, cwd=tmp_path)
        assert result.returncode == 0, (step[0], result.stderr)
    assert read_nbest(str(tmp_path / "mbr.nbest")).feature_names[-1] == "mbr"
    assert "mbr" in json.loads((tmp_path / "w.json").read_text())["weights"]


API_SCRIPT = f"""
import rerank
J = {str(JOSHUA)!r}
refs = [J + f".ref.{{k}}" for k in range(4)]
nbest = rerank.add_features(rerank.read_nbest(J + ".nbest"), "mbr", utility="chrf")
tuned = rerank.tune(nbest, refs, tuner="mert", tokenize="none", restarts=2)
best = rerank.apply(nbest, tuned.weights)
ev = rerank.evaluate(refs, ("first", rerank.first_best(nbest)), {{"mert": best}}, metrics=("bleu",), ar=50,
                     bootstrap=0, tokenize="none")
print(ev.score("mert", "bleu"), rerank.oracle(nbest, refs, tokenize="none").bleu)
print(sorted(m for m in sys.modules if m.split(".")[0] in {NEURAL!r}))
"""


def test_the_python_api_works_without_torch():
    result = without_neural(API_SCRIPT)
    assert result.returncode == 0, result.stderr
    scores, loaded = result.stdout.strip().splitlines()
    assert all(float(x) > 0 for x in scores.split()) and loaded == "[]"
    failed = without_neural("import rerank\nrerank.add_features(rerank.read_nbest(sys.argv[1]), 'lm')",
                            f"{JOSHUA}.nbest")
    assert failed.returncode != 0
    assert f"needs torch, which is not installed: {INSTALL_NEURAL}" in failed.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args,what", [
    (["features", "{nbest}", "--which", "s_s", "--src", "{ref}", "-m", "{model}", "--mlmme-backend", "torch", "-o",
      "out"], "the s_s feature"),   # on numpy (the default) it runs: tests/test_embeddings_numpy_core.py
    (["features", "{nbest}", "--which", "lm", "--lm-model", ".", "-o", "out"], "the lm feature"),
    (["features", "{nbest}", "--which", "channel", "--channel-model", ".", "--src", "{ref}", "-o", "out"],
     "the channel feature"),
    (["tune", "{nbest}", "-r", "{ref}", "--tuner", "pro", "-o", "w.json"], "the pro tuner"),
    (["embed", "encode", "--model", "{model}", "--lang", "en", "--input", "{ref}", "-o", "v.npy"], "this command"),
    (["nmt", "translate", "--model", ".", "--input", "{ref}", "--output", "out.txt"], "this command"),
    (["lm", "score", "--model", ".", "--input", "{ref}"], "this command"),
])
def test_what_needs_torch_says_what_to_install_in_one_line(tmp_path, args, what):
    (tmp_path / "in.nbest").write_text("0 ||| a b ||| nmt= -1 ||| -1\n0 ||| a c ||| nmt= -2 ||| -2\n")
    (tmp_path / "src").write_text("a b\n")
    names = {"nbest": tmp_path / "in.nbest", "ref": tmp_path / "src",
             "model": ROOT / "rerank" / "data" / "models" / "mlmme-small.pt"}
    result = rerank_without_neural(*[a.format(**names) for a in args], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr   # before any work: nothing read, nothing printed
    assert lines[-1].startswith(f"rerank {args[0]}: error: {what} needs ")
    assert lines[-1].endswith(f"which is not installed: {INSTALL_NEURAL}")
    assert not (tmp_path / "out").exists() and not (tmp_path / "w.json").exists()


def test_missing_dependency_is_an_input_error_and_an_import_error():
    with pytest.raises(MissingDependency) as caught:
        with needs_neural("the s_s feature"):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
    assert isinstance(caught.value, InputError) and isinstance(caught.value, ImportError)
    assert str(caught.value) == f"the s_s feature needs torch, which is not installed: {INSTALL_NEURAL}"
    with pytest.raises(ModuleNotFoundError):  # not a neural module: passed on as it is
        with needs_neural("x"):
            raise ModuleNotFoundError("No module named 'nosuch'", name="nosuch")


def test_a_feature_takes_typed_options_from_a_script_as_from_the_command_line(tmp_path):
    from rerank.cli import main

    nbest = read_nbest(f"{JOSHUA}.nbest")
    options = MBROptions(utility="chrf", temperature=0.5, score_feature="total")
    from_script = MBRFeature().compute(nbest, ["mbr"], FeatureContext(), options)["mbr"]
    assert main(["features", f"{JOSHUA}.nbest", "--which", "mbr", "--mbr-utility", "chrf", "--mbr-temperature",
                 "0.5", "--mbr-score-feature", "total", "-o", str(tmp_path / "out.nbest")]) == 0
    from_cli = read_nbest(str(tmp_path / "out.nbest")).column("mbr")
    np.testing.assert_allclose(from_script, from_cli, rtol=0, atol=1e-4)  # the file holds 4 decimals or more
    defaults = MBRFeature().compute(nbest, ["mbr"])["mbr"]                # context and options have defaults
    np.testing.assert_array_equal(defaults, MBRFeature().compute(nbest, ["mbr"], options={"utility": "bleu"})["mbr"])
    with pytest.raises(FrozenInstanceError):
        options.temperature = 2.0
    with pytest.raises(InputError, match="unknown option 'temprature' for MBROptions"):
        make_options(MBROptions, {"temprature": 2.0})
    with pytest.raises(InputError, match="option 'temperature' of MBROptions must be a positive finite number, got 0"):
        MBRFeature().compute(nbest, ["mbr"], options=MBROptions(temperature=0))


def test_a_tuner_takes_typed_options_and_records_them_as_a_dict():
    import argparse
    from dataclasses import asdict

    from rerank.io import read_lines
    from rerank.mira.tuners import KBMiraOptions, KBMiraTuner, MertOptions, MertTuner
    from rerank.tuning import prepare

    nbest = read_nbest(f"{JOSHUA}.nbest")
    refs = [read_lines(f"{JOSHUA}.ref.{k}") for k in range(4)]
    data = prepare(nbest, refs, tokenize="none")
    w0 = np.ones(len(data.feature_names))
    typed = KBMiraTuner().tune(data, w0, seed=3, options=KBMiraOptions(epochs=4))
    as_dict = KBMiraTuner().tune(data, w0, seed=3, options={"epochs": 4})
    np.testing.assert_array_equal(typed.weights, as_dict.weights)
    assert MertTuner().make_options(None) == MertOptions()
    parser = argparse.ArgumentParser()
    KBMiraTuner().add_arguments(parser)
    args = parser.parse_args(["--epochs", "7", "--no-shuffle"])
    assert KBMiraTuner().options_from_args(args) == KBMiraOptions(epochs=7, shuffle=False)
    assert asdict(KBMiraTuner().options_from_args(args)) == {"epochs": 7, "C": 0.01, "decay": 0.999, "model_bg": False,
                                                             "shuffle": False}


def test_progress_goes_to_a_callback_a_log_or_nowhere(caplog):
    seen = []
    assert list(track(range(3), lambda desc, done, total: seen.append((desc, done, total)), "work")) == [0, 1, 2]
    assert seen == [("work", 1, 3), ("work", 2, 3), ("work", 3, 3)]
    assert list(track(iter("ab"), False, "quiet")) == ["a", "b"]
    caplog.set_level("INFO", logger="rerank.progress")
    with progress_bar(True, "logged", total=2, unit="sent") as bar:
        bar.update(2)
    assert "logged: 2/2 sent" in caplog.text


# Command modules (the command line) may print and draw bars; library modules may not. Recipes are
# pipelines that report like commands. Files another change is refactoring are listed with what is left.
COMMAND_LINE = {"rerank/cli.py", "rerank/cliargs.py", "rerank/__main__.py", "embeddings/command.py", "embeddings/commands_extra.py",
                "nmt/command.py", "nmt/lm_command.py", "nmt/__main__.py", "rerank/metrics/meteor/__main__.py"}
NOT_YET: dict[str, str] = {}   # module -> what is left (none now)


def library_modules():
    for folder in ("rerank", "mira", "embeddings", "nmt"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name.startswith("rerank/commands/") or name in COMMAND_LINE or name in NOT_YET:
                continue
            yield name, ast.parse(path.read_text(encoding="utf-8"))


def test_library_modules_neither_print_nor_draw_bars():
    found = []
    for name, tree in library_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{name}:{node.lineno}: print()")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(m.split(".")[0] == "tqdm" for m in modules):
                    found.append(f"{name}:{node.lineno}: imports tqdm")
            if isinstance(node, ast.Attribute) and node.attr in ("stderr", "stdout") and \
                    isinstance(node.value, ast.Name) and node.value.id == "sys" and name != "rerank/io.py":
                found.append(f"{name}:{node.lineno}: sys.{node.attr}")  # io.py: "-" reads stdin, writes stdout
    assert not found, "\n".join(found)


def test_recipes_log_and_print_only_on_their_command_lines():
    """The pipelines (rerank.recipes) report through logging too: print() only in the command
    modules (*_command.py), the `main` of a `python -m` script and its `__main__` block."""
    found = []

    def visit(node, name, where):
        for child in ast.iter_child_nodes(node):
            inside = where
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = child.name
            elif isinstance(child, ast.If) and "__main__" in ast.unparse(child.test):
                inside = "main"
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "print" \
                    and where not in ("main", "_main"):
                found.append(f"{name}:{child.lineno}: print() in {where or 'the module'}")
            visit(child, name, inside)

    for path in sorted((ROOT / "recipes").glob("*.py")):
        if not path.name.endswith("_command.py"):
            visit(ast.parse(path.read_text(encoding="utf-8")), path.name, None)
    assert not found, "\n".join(found)
