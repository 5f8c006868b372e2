"""The plug-in API: commands, features and tuners found through entry points.

The example package in tests/data/plugin_example is installed into a temporary folder (pip
--target) and used through the `rerank` command line in a subprocess whose PYTHONPATH holds it,
exactly as a user's own plug-in package would be.
"""

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from rerank import plugins
from rerank.cli import main
from rerank.features import Feature
from rerank.formats import read_nbest

HERE = Path(__file__).parent
EXAMPLE = HERE / "data" / "plugin_example"
NBEST = "0 ||| a b c ||| nmt= -1 ||| -1\n0 ||| a b ||| nmt= -2 ||| -2\n1 ||| x ||| nmt= -1 ||| -1\n1 ||| x y z w ||| nmt= -3 ||| -3\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    target, source = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("src") / "plugin"
    shutil.copytree(EXAMPLE, source)  # the build writes beside the sources: not into the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, capture_output=True)
    return target


def rerank(site, *args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "rerank", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True)


def test_the_installed_command_is_listed_and_runs(site):
    assert "count" in rerank(site, "--help").stdout
    result = rerank(site, "count", HERE / "data" / "joshua10" / "nbest.joshua")
    assert result.returncode == 0, result.stderr
    n_lines = len((HERE / "data" / "joshua10" / "nbest.joshua").read_text(encoding="utf-8").splitlines())
    assert result.stdout.strip() == f"10 sentences, {n_lines} hypotheses"


def test_an_installed_feature_adds_its_column(site, tmp_path):
    (tmp_path / "in.nbest").write_text(NBEST)
    (tmp_path / "src").write_text("one two\nthree\n")
    result = rerank(site, "features", tmp_path / "in.nbest", "--which", "len_ratio", "--src", tmp_path / "src",
                    "-o", tmp_path / "out.nbest")
    assert result.returncode == 0, result.stderr
    out = read_nbest(str(tmp_path / "out.nbest"))
    assert out.feature_names == ["nmt", "len_ratio"]
    assert out.column("len_ratio").tolist() == [1.5, 1.0, 1.0, 4.0]
    missing = rerank(site, "features", tmp_path / "in.nbest", "--which", "len_ratio", "-o", tmp_path / "x.nbest")
    assert missing.returncode == 2 and "len_ratio needs the source sentences" in missing.stderr
    assert not (tmp_path / "x.nbest").exists()


def test_an_installed_tuner_tunes(site, tmp_path):
    (tmp_path / "in.nbest").write_text(NBEST)
    (tmp_path / "ref").write_text("a b\nx y z w\n")
    result = rerank(site, "tune", "--nbest", tmp_path / "in.nbest", "-r", tmp_path / "ref", "--tokenize", "none",
                    "--tuner", "random-search", "--samples", "50", "-o", tmp_path / "w.json")
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "w.json").read_text())
    assert saved["meta"]["tuner"] == "random-search" and saved["meta"]["options"] == {"samples": 50}
    # the reference is each list's second hypothesis, which a negative nmt weight picks: BLEU 100
    assert saved["weights"]["nmt"] < 0 and saved["meta"]["tuned_score"] == pytest.approx(100.0)


def test_without_the_package_its_names_are_unknown(tmp_path, capsys):
    (tmp_path / "in.nbest").write_text(NBEST)
    assert main(["features", str(tmp_path / "in.nbest"), "--which", "len_ratio", "-o", str(tmp_path / "o")]) == 2
    assert "unknown feature 'len_ratio'" in capsys.readouterr().err


def fake_entry_points(monkeypatch, group, *entries):
    real = plugins.entry_points

    def entry_points(group=None):
        mine = [EntryPoint(name, value, group) for name, value in entries]
        return mine if group == fake_group else real(group=group)

    fake_group = group
    monkeypatch.setattr(plugins, "entry_points", entry_points)
    plugins.load.cache_clear()


@pytest.fixture(autouse=True)
def fresh_cache():
    plugins.load.cache_clear()
    yield
    plugins.load.cache_clear()


def test_a_broken_plugin_is_one_error_not_a_traceback(monkeypatch, capsys):
    """Said where the commands are listed (--help, a missing or unknown command) or it is asked for;
    this distribution's commands scan no entry points (rerank.commands.COMMANDS) and run without it."""
    fake_entry_points(monkeypatch, "rerank.commands", ("broken", "no_such_module_here:add_parser"))
    for argv in (["broken"], ["--help"], [], ["nonesuch"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "cannot load plug-in 'broken' (no_such_module_here:add_parser)" in err and "Traceback" not in err
    assert main(["info", "x"]) == 2
    assert capsys.readouterr().err == "rerank info: error: x: cannot open: No such file or directory\n"


def test_two_plugins_with_one_name_are_refused(monkeypatch):
    fake_entry_points(monkeypatch, "rerank.tuners", ("mira", "rerank.mira.tuners:KBMiraTuner"), ("mira", "rerank.mira.tuners:ProTuner"))
    with pytest.raises(plugins.PluginError, match="two plug-ins named 'mira'"):
        plugins.tuners()


class SecondSimilarity(Feature):
    columns = ("s_s",)


class SameOptions(Feature):
    columns = ("other",)

    def add_arguments(self, group):
        group.add_argument("--model")


def test_a_column_claimed_by_two_features_is_refused(monkeypatch, tmp_path, capsys):
    fake_entry_points(monkeypatch, "rerank.features", ("mlmme", "rerank.embeddings.features:MLMMEFeatures"),
                      ("copy", "tests.test_plugins:SecondSimilarity"))
    (tmp_path / "in.nbest").write_text(NBEST)
    assert main(["features", str(tmp_path / "in.nbest"), "--which", "s_s", "-o", str(tmp_path / "o")]) == 2
    assert "feature column 's_s' is provided by two plug-ins: copy and mlmme" in capsys.readouterr().err


def test_plugins_whose_options_clash_are_named(monkeypatch, capsys):
    fake_entry_points(monkeypatch, "rerank.features", ("mlmme", "rerank.embeddings.features:MLMMEFeatures"),
                      ("same", "tests.test_plugins:SameOptions"))
    assert main(["features", "x", "-o", "y"]) == 2
    err = capsys.readouterr().err
    assert "options of the installed plug-ins clash" in err and "--model" in err and "Traceback" not in err


TSV = "0\ta b c\tnmt=-1.0,len=3.0\n0\ta b\tnmt=-2.0,len=2.0\n1\tx\tnmt=-1.0,len=1.0\n1\tx y z w\tnmt=-3.0,len=4.0\n"


def test_an_installed_format_is_detected_read_converted_and_tuned(site, tmp_path):
    (tmp_path / "in.tsv").write_text(TSV)
    (tmp_path / "ref").write_text("a b\nx y z w\n")
    assert "tsv-nbest" in rerank(site, "convert", "--help").stdout  # --format and --to come from the table
    info = rerank(site, "info", tmp_path / "in.tsv", "--json")
    assert info.returncode == 0, info.stderr
    summary = json.loads(info.stdout)
    assert summary["format"] == "tsv-nbest" and summary["detected"] and summary["hypotheses"] == 4
    assert list(summary["features"]) == ["nmt", "len"]
    moses = rerank(site, "convert", tmp_path / "in.tsv", "--to", "moses", "-o", tmp_path / "out.nbest")
    assert moses.returncode == 0, moses.stderr
    assert read_nbest(str(tmp_path / "out.nbest")).column("len").tolist() == [3.0, 2.0, 1.0, 4.0]
    back = rerank(site, "convert", tmp_path / "out.nbest", "--to", "tsv-nbest", "-o", tmp_path / "back.tsv")
    assert back.returncode == 0 and (tmp_path / "back.tsv").read_text() == TSV  # the round trip
    tuned = rerank(site, "tune", "--nbest", tmp_path / "in.tsv", "-r", tmp_path / "ref", "--tokenize", "none",
                   "-o", tmp_path / "w.json")
    assert tuned.returncode == 0, tuned.stderr
    saved = json.loads((tmp_path / "w.json").read_text())
    # the reference is the second hypothesis of each list, which a negative nmt weight picks: BLEU 100
    assert saved["meta"]["tuned_score"] == pytest.approx(100.0)


def test_without_the_package_its_format_is_unknown(tmp_path, capsys):
    (tmp_path / "in.tsv").write_text(TSV)
    assert main(["info", str(tmp_path / "in.tsv")]) == 2
    err = capsys.readouterr().err
    assert "cannot tell the n-best format" in err and "tried" in err and "--format" in err
