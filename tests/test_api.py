"""The Python API (rerank.api, re-exported by `rerank`): the same numbers as the commands, in a
few lines; `import rerank` stays light."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import rerank
from rerank import api
from rerank.errors import InputError
from tests.cli_helpers import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M30K = os.path.join(ROOT, "rerank", "data", "multi30k")
JOSHUA = os.path.join(ROOT, "tests", "data", "joshua10")
J_NBEST, J_REFS = os.path.join(JOSHUA, "nbest.joshua"), [os.path.join(JOSHUA, f"ref.{k}") for k in range(4)]
WEIGHTS = {"nmt": 1.0, "nmt_norm": 0.5, "len": 0.1, "channel": 0.2, "channel_norm": 0.0, "lm": 0.1, "lm_norm": 0.3}


def test_import_rerank_is_light_and_lists_the_api():
    code = ("import rerank, sys; assert 'torch' not in sys.modules and 'rerank.api' not in sys.modules; "
            "assert 'evaluate' in dir(rerank) and 'tune' in rerank.__all__; rerank.evaluate; "
            "assert 'torch' not in sys.modules and 'sklearn' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError):
        rerank.no_such_name  # noqa: B018
    assert set(api.__all__) == set(rerank._API)


def test_ten_lines_from_two_nbest_lists_give_the_p_values_of_rerank_eval(tmp_path, capsys):
    refs = [os.path.join(M30K, "test_2016_flickr.de.gz")]
    weak = rerank.read_nbest(os.path.join(M30K, "weak.test_2016.20best.gz"))
    regular = rerank.read_nbest(os.path.join(M30K, "regular.test_2016.20best.gz"))
    ev = rerank.evaluate(refs, ("weak", rerank.first_best(weak)),
                         {"regular": rerank.first_best(regular), "reranked": rerank.apply(regular, WEIGHTS)},
                         metrics=("bleu", "ter"), ar=1000, bootstrap=200, lang="de")
    table = ev.to_markdown()
    assert "| reranked |" in table and ev.p_value("weak", "bleu") is None

    for name, hyps in (("weak", rerank.first_best(weak)), ("regular", rerank.first_best(regular))):
        (tmp_path / name).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    (tmp_path / "w.json").write_text(json.dumps(WEIGHTS))
    code, out, err = run(["eval", "-r", refs[0], "-b", f"weak={tmp_path / 'weak'}", f"regular={tmp_path / 'regular'}",
                          "--nbest", "reranked=" + os.path.join(M30K, "regular.test_2016.20best.gz"),
                          "--weights", tmp_path / "w.json", "--metrics", "bleu,ter", "--lang", "de", "--ar", "1000",
                          "--bootstrap", "200", "--to", "json", "--quiet"], capsys)
    assert code == 0, err
    cli = {(r["system"], r["metric"]): r for r in json.loads(out)["results"]}
    api = {(r["system"], r["metric"]): r for r in json.loads(ev.to_json())["results"]}
    assert cli.keys() == api.keys()
    for key, cell in cli.items():
        for field in ("score", "p", "p_raw", "s_sel", "delta_low", "delta_high", "bs_p", "marks"):
            assert api[key][field] == cell[field], (key, field)
        assert ev.score(*key) == cell["score"] and ev.p_value(*key) == cell["p"]


def test_evaluate_takes_runs_names_and_files(tmp_path):
    refs = ["a b c d e", "f g h i j", "k l m n o"]
    base = ["a b x d e", "f x h i j", "k l m n o"]
    runs = [["a b c d e", "f g h i j", "k x m n o"], ["a b c d e", "f g h x j", "k l m n o"]]
    path = tmp_path / "sys.txt"
    path.write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    ev = rerank.evaluate([refs], base, {"runs": runs, "file": str(path)}, metrics=["bleu"], ar=100, bootstrap=0)
    assert ev.systems == ["baseline", "runs", "file"] and ev.table.config["runs"] == {"baseline": 1, "runs": 2, "file": 1}
    assert ev.score("file", "bleu") == pytest.approx(100.0)
    named = rerank.evaluate([refs], ("decoder", [base, base]), {"s": runs}, metrics=["bleu"], ar=100, bootstrap=0)
    assert named.baseline == "decoder" and "decoder" in named.to_latex()
    html = named.to_html(title="t")
    assert html.lstrip().lower().startswith("<!doctype html") and "decoder" in html
    with pytest.raises(InputError, match="lines"):
        rerank.evaluate([refs], base[:2], {"s": runs}, metrics=["bleu"], ar=100, bootstrap=0)
    with pytest.raises(KeyError, match="no cell"):
        ev.score("nobody", "bleu")


def test_references_are_paths_or_lists_with_one_reader(tmp_path):
    from rerank import api   # eval and report read their references in rerank.evaluate
    from rerank.formats import read_references as formats_reader
    from rerank.io import read_references

    assert formats_reader is read_references and api.read_references is read_references
    from_files = read_references(J_REFS)
    assert read_references([J_REFS[0], from_files[1]]) == from_files[:2]
    assert read_references(J_REFS[0]) == from_files[:1]
    with pytest.raises(InputError, match="1 lines but"):
        read_references([J_REFS[0], ["one line"]])
    with pytest.raises(InputError, match="reference lines for 3 n-best sentences"):
        read_references(J_REFS, 3, "x.nbest")
    with pytest.raises(InputError, match="empty file"):
        read_references([[]])


def test_apply_first_best_and_oracle_match_the_commands(tmp_path, capsys):
    nbest = rerank.read_nbest(J_NBEST)
    weights = {name: 1.0 for name in nbest.feature_names}
    (tmp_path / "w.json").write_text(json.dumps(weights))
    code, _, err = run(["apply", J_NBEST, "-w", tmp_path / "w.json", "-o", tmp_path / "best"], capsys)
    assert code == 0, err
    assert rerank.apply(J_NBEST, tmp_path / "w.json") == rerank.apply(nbest, weights) == \
        (tmp_path / "best").read_text(encoding="utf-8").splitlines()
    assert rerank.first_best(nbest) == [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]
    code, out, err = run(["oracle", J_NBEST, "--tokenize", "none", *sum((["-r", r] for r in J_REFS), []),
                          "-o", tmp_path / "oracle"], capsys)
    assert code == 0, err
    found = rerank.oracle(nbest, J_REFS, tokenize="none")
    assert found.hypotheses == (tmp_path / "oracle").read_text(encoding="utf-8").splitlines()
    assert f"oracle BLEU           = {found.bleu:.2f}" in out and f"= {found.first_bleu:.2f}" in out
    with pytest.raises(InputError, match="lacks"):
        rerank.apply(nbest, {"no_such_feature": 1.0})


def test_tune_is_rerank_tune_and_resumes(tmp_path, capsys):
    nbest = rerank.read_nbest(J_NBEST)
    result = rerank.tune(nbest, J_REFS, runs=3, seed=4, tokenize="none", epochs=2)
    assert [r.seed for r in result.runs] == [4, 5, 6] and result.score == max(result.scores)
    assert result.weights == result.runs[result.best].weights and list(result.weights) == nbest.feature_names
    out = tmp_path / "w.json"
    code, _, err = run(["tune", J_NBEST, *sum((["-r", r] for r in J_REFS), []), "--runs", "3", "--seed", "4",
                        "--tokenize", "none", "--epochs", "2", "-o", out], capsys)
    assert code == 0, err
    saved = json.loads(out.read_text())
    assert saved["weights"] == pytest.approx(result.weights) and saved["meta"]["tuned_scores"] == result.scores
    ter = rerank.tune(nbest, J_REFS, metric="ter", runs=3, tokenize="none", epochs=2)
    assert ter.score == min(ter.scores)

    path = tmp_path / "api.json"
    first = rerank.tune(J_NBEST, J_REFS, runs=2, tokenize="none", epochs=2, output=path)
    again = rerank.tune(nbest, J_REFS, runs=2, tokenize="none", epochs=2, output=path)
    assert [r.reused for r in first.runs] == [False, False] and [r.reused for r in again.runs] == [True, True]
    assert again.weights == pytest.approx(first.weights) and json.loads(path.read_text())["meta"]["best_of_runs"]
    other = rerank.tune(nbest, J_REFS, runs=2, tokenize="none", epochs=3, output=path)
    assert [r.reused for r in other.runs] == [False, False]
    reseeded = rerank.tune(nbest, J_REFS, runs=2, seed=7, tokenize="none", epochs=3, output=path)
    assert [r.reused for r in reseeded.runs] == [False, False] and [r.seed for r in reseeded.runs] == [7, 8]
    with pytest.raises(InputError, match="unknown .*option .epoch."):
        rerank.tune(nbest, J_REFS, epoch=2)
    with pytest.raises(InputError, match="unknown tuner"):
        rerank.tune(nbest, J_REFS, tuner="nope")


def test_run_seeds_is_the_one_helper():
    from rerank.multirun import run_seeds

    assert run_seeds(1, 3) == [1, 2, 3] and run_seeds(7, 1) == [7]
    with pytest.raises(ValueError):
        run_seeds(1, 0)


def test_add_features_by_name_with_keyword_options(tmp_path):
    nbest = rerank.read_nbest(os.path.join(M30K, "weak.test_2016.20best.gz")).select_sentences(range(20))
    with_mbr = rerank.add_features(nbest, "mbr")
    chrf = rerank.add_features(nbest, ["mbr"], mbr_utility="chrf")
    assert with_mbr.feature_names == nbest.feature_names + ["mbr"]
    assert np.array_equal(rerank.add_features(nbest, "mbr", utility="chrf").column("mbr"), chrf.column("mbr"))
    assert not np.allclose(with_mbr.column("mbr"), chrf.column("mbr"))
    with pytest.raises(InputError, match="already"):
        rerank.add_features(with_mbr, "mbr")
    assert np.allclose(rerank.add_features(with_mbr, "mbr", replace=True, mbr_utility="chrf").column("mbr"), chrf.column("mbr"))
    with pytest.raises(InputError, match="unknown feature option"):
        rerank.add_features(nbest, "mbr", utilty="chrf")
    with pytest.raises(InputError, match="unknown feature"):
        rerank.add_features(nbest, "no_such_column")
    written = rerank.write_nbest(chrf, tmp_path / "out.nbest")
    assert rerank.read_nbest(written[0]).feature_names == chrf.feature_names


def test_the_tests_on_arrays_are_exported():
    metric = rerank.make_metric("bleu")
    hyps_a = [["a b c d", "e f g h"]]
    hyps_b = [["a b c x", "e f g h"]]
    refs = [["a b c d", "e f g h"]]
    stats_a = np.stack([metric.sentence_stats(h, refs) for h in hyps_a])
    stats_b = np.stack([metric.sentence_stats(h, refs) for h in hyps_b])
    (result,) = rerank.approximate_randomization([metric], [stats_a], [stats_b], trials=50, seed=1)
    assert 0 < result.p_value <= 1
    assert rerank.paired_bootstrap is api.paired_bootstrap


def test_the_library_logs_instead_of_printing(tmp_path, capsys, caplog):
    nbest = rerank.read_nbest(J_NBEST)
    stale = tmp_path / "w.run3.json"
    first = rerank.tune(nbest, J_REFS, runs=3, tokenize="none", epochs=1, output=tmp_path / "w.json")
    assert first.runs[2].path == str(stale) and stale.exists()
    with caplog.at_level("INFO", logger="rerank"):
        rerank.tune(nbest, J_REFS, runs=2, tokenize="none", epochs=1, output=tmp_path / "w.json")
        rerank.apply(nbest, {nbest.feature_names[0]: 1.0})
    assert capsys.readouterr() == ("", "")
    messages = [r.getMessage() for r in caplog.records]
    assert any("removed" in m and "w.run3.json" in m for m in messages), messages   # the earlier third run
    assert any(m.startswith("warning: weights: no weight for") for m in messages), messages
    assert not stale.exists()


def test_a_script_that_configures_no_logging_sees_nothing():
    """The `rerank` logger has a NullHandler: without logging set up by the script, a library
    warning is not printed by Python's last-resort handler; with logging set up, it is shown."""
    import subprocess
    import sys

    emit = "logging.getLogger('rerank.multirun').warning('a library warning')\n"
    quiet = subprocess.run([sys.executable, "-c", "import logging, rerank\n" + emit], capture_output=True, text=True)
    shown = subprocess.run([sys.executable, "-c", "import logging, rerank\nlogging.basicConfig()\n" + emit],
                           capture_output=True, text=True)
    assert quiet.returncode == shown.returncode == 0
    assert quiet.stderr == "" and "a library warning" in shown.stderr


def test_one_options_object_per_job_checked_once_without_flag_names():
    """EvalOptions and TuneSettings refuse what no data can fix, naming the option by its keyword (the
    command line says the flag instead: test_cli_consistency); an unknown keyword is an InputError."""
    refs, hyps = [["a b c", "d e f"]], ["a b c", "d e x"]
    for bad, option in (({"bootstrap": 1}, "bootstrap"), ({"ar": 0}, "ar"), ({"alpha": 1.5}, "alpha"),
                        ({"lang": "xx"}, "lang")):
        with pytest.raises(InputError) as caught:
            rerank.evaluate(refs, hyps, {"s": hyps}, **bad)
        assert caught.value.option == option and caught.value.problem.startswith(option) and "--" not in str(caught.value)
    with pytest.raises(InputError, match="unknown METEOR option 'bogus'"):
        rerank.EvalOptions(metrics=("meteor",), meteor={"bogus": 1})
    with pytest.raises(InputError, match="unknown evaluation option 'trials'"):
        rerank.evaluate(refs, hyps, {"s": hyps}, trials=5)
    with pytest.raises(InputError) as caught:
        rerank.TuneSettings(runs=0)
    assert caught.value.option == "runs" and "--" not in str(caught.value)
    settings = rerank.TuneSettings.make(rerank.TuneSettings(metric="ter"), runs=2, epochs=3)
    assert (settings.metric, settings.runs, settings.tuner_options) == ("ter", 2, {"epochs": 3})
    assert "runs" not in settings.reuse_record() and settings.reuse_record()["tuner_options"] == {"epochs": 3}
    assert "lang" not in rerank.TuneSettings(lang="de").reuse_record()     # BLEU does not read it
    assert rerank.TuneSettings(metric="meteor", lang="de").reuse_record()["lang"] == "de"
    ev = rerank.evaluate(refs, hyps, {"s": hyps}, rerank.EvalOptions(metrics=("bleu",), ar=20, bootstrap=0))
    assert ev.metrics == ["bleu"] and ev.table.config["ar_trials"] == 20
