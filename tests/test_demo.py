"""`rerank demo` on the shipped data (first sentences only, so it takes seconds)."""

import json
import os

import numpy as np
import pytest
import sacrebleu

from rerank.recipes.demo import BASE_FEATURES, MODEL_FEATURES, MODEL_SOURCE, data_dir, run_demo, shipped_lists
from rerank.cli import main
from rerank.formats import read_nbest, write_nbest
from rerank.io import read_lines


def test_shipped_assets_are_complete():
    lists = shipped_lists()
    assert lists, "no n-best lists in rerank/data/multi30k"
    for (flavour, n), paths in lists.items():
        test = read_nbest(paths["test_2016"])
        assert test.n_sentences == 1000 and test.sizes.max() == n, (flavour, n)
        assert read_nbest(paths["val"]).n_sentences == 1014
        # the NMT columns; with the channel and LM columns once `recipe reproduce --publish` wrote them
        assert test.feature_names in (BASE_FEATURES, BASE_FEATURES + MODEL_FEATURES), (flavour, n)
    assert os.path.exists(os.path.join(data_dir(), "models", "mlmme-bpe.pt"))


@pytest.mark.neural
def test_demo_quick_run(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--sentences", "40", "--runs", "2", "--epochs", "3", "--ar", "300", "--bootstrap", "50",
                 "--out", str(out)])
    assert code == 0
    report = capsys.readouterr().out
    assert "| NMT 1-best |" in report and "| MIRA: + s_s |" in report
    assert "text-only" in report
    summary = json.loads((out / "results.json").read_text())
    cells = {(r["system"], r["metric"]): r for r in summary["results"]}
    # the baseline row is sacrebleu's BLEU of the first hypotheses of the shipped test list
    lists = shipped_lists()
    key = sorted(k for k in lists if k[1] == 20 and k[0] == "optimised") or sorted(k for k in lists if k[1] == 20)
    test = read_nbest(lists[key[0]]["test_2016"]).select_sentences(range(40))
    refs = read_lines(os.path.join(data_dir(), "multi30k", "test_2016_flickr.de.gz"))[:40]
    first = [test.hyps[int(i)] for i in test.offsets[:-1]]
    assert abs(cells[("NMT 1-best", "bleu")]["score"] - sacrebleu.corpus_bleu(first, [refs]).score) < 1e-9
    for name in ("report.md", "deltas.png", "results.md", "MIRA_s_s.weights.run2.json", "report.html"):
        assert (out / name).exists(), name
    assert f"HTML report: {out / 'report.html'}" in report
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '<table id="significance-table">' in page and page.count('class="example better"') > 0
    assert "<td>MIRA: + s_s + mbr</td>" in page and '<section id="oracle">' in page
    weights = json.loads((out / "MIRA_s_s.weights.run1.json").read_text())["weights"]
    assert set(weights) == {"nmt", "nmt_norm", "len", "s_s"}
    assert "| MIRA: + mbr |" in report and "| MIRA: + s_s + mbr |" in report
    both = json.loads((out / "MIRA_s_s_mbr.weights.run1.json").read_text())["weights"]
    assert set(both) == {"nmt", "nmt_norm", "len", "s_s", "mbr"}
    # the mbr column is rerank.consensus on the NMT log-probabilities of the shipped list
    from rerank.consensus import mbr_scores

    featured = read_nbest(str(out / "optimised.test_2016.20best.feat.gz"))
    expected = mbr_scores(test, test.column("nmt"))
    assert abs(featured.column("mbr") - expected).max() < 1e-9
    if set(MODEL_FEATURES) <= set(test.feature_names):   # published lists: the six systems, and where channel/lm came from
        assert "| MIRA: + channel + lm |" in report and "| MIRA: all |" in report and f"{MODEL_SOURCE}." in report


def _lists_with(tmp_path, columns):
    """The shipped optimised val/test lists cut to 3 hypotheses, with the NMT columns and the given
    channel/lm `columns` (made-up values), as optimised.{val,test_2016}.3best.gz in a folder."""
    folder = tmp_path / "lists"
    folder.mkdir()
    for split, path in shipped_lists()[("optimised", 20)].items():
        nbest = read_nbest(path).head(3).select_features(BASE_FEATURES)
        made_up = {"channel": 0.8 * nbest.column("nmt") - 0.5, "lm": -2.0 * nbest.column("len") + nbest.rank_of_hyp}
        made_up["channel_norm"] = made_up["channel"] / (nbest.column("len") + 1)
        made_up["lm_norm"] = made_up["lm"] / (nbest.column("len") + 1)
        for name in columns:
            nbest = nbest.with_feature(name, made_up[name])
        write_nbest(nbest, str(folder / f"optimised.{split}.3best.gz"))
    return folder


def _quick_demo(lists, out=None):
    return run_demo(out_dir=out and str(out), n=3, runs=1, epochs=2, ar_trials=50, bootstrap=0, metrics=("bleu",),
                    sentences=20, lists_dir=str(lists))


@pytest.mark.neural
def test_demo_adds_the_channel_and_lm_systems_when_the_lists_carry_them(tmp_path, caplog):
    caplog.set_level("INFO", logger="rerank")
    lists, out = _lists_with(tmp_path, MODEL_FEATURES), tmp_path / "out"
    report = _quick_demo(lists, out)
    systems = list(dict.fromkeys(r["system"] for r in json.loads((out / "results.json").read_text())["results"]))
    assert systems == ["NMT 1-best", "MIRA: NMT features", "MIRA: + s_s", "MIRA: + mbr", "MIRA: + s_s + mbr",
                       "MIRA: + channel + lm", "MIRA: all"]
    assert "| MIRA: + channel + lm |" in report and "| MIRA: all |" in report and MODEL_SOURCE not in report
    assert f"channel/lm: the columns of the lists in {lists}." in report   # not the shipped lists: named
    assert set(json.loads((out / "MIRA_channel_lm.weights.run1.json").read_text())["weights"]) == {
        "nmt", "nmt_norm", "len", "channel", "channel_norm", "lm", "lm_norm"}
    assert set(json.loads((out / "MIRA_all.weights.run1.json").read_text())["weights"]) == {
        "nmt", "nmt_norm", "len", "s_s", "mbr", "channel", "channel_norm", "lm", "lm_norm"}
    given = read_nbest(str(lists / "optimised.test_2016.3best.gz")).select_sentences(range(20))
    featured = read_nbest(str(out / "optimised.test_2016.3best.feat.gz"))
    for name in MODEL_FEATURES:  # the precomputed columns are used as they are
        assert np.array_equal(featured.column(name), given.column(name)), name
    assert "are not run" not in caplog.text  # the demo's log: INFO records (the command shows them)


@pytest.mark.neural
def test_demo_says_why_without_the_channel_and_lm_columns(tmp_path, caplog):
    caplog.set_level("INFO", logger="rerank")
    report = _quick_demo(_lists_with(tmp_path, ["channel", "channel_norm"]))
    rows = [line.split("|")[1].strip() for line in report.splitlines() if line.startswith("| MIRA")]
    assert rows == ["MIRA: NMT features", "MIRA: + s_s", "MIRA: + mbr", "MIRA: + s_s + mbr"]
    assert "channel/lm" not in report
    err = caplog.text
    assert ("'MIRA: + channel + lm' and 'MIRA: all' are not run: the lists have no channel/lm columns "
            "(missing: lm, lm_norm)") in err
