"""`rerank demo` on the shipped data (first sentences only, so it takes seconds)."""

import json
import os

import sacrebleu

from recipes.demo import data_dir, shipped_lists
from rerank.cli import main
from rerank.formats import read_nbest
from rerank.io import read_lines


def test_shipped_assets_are_complete():
    lists = shipped_lists()
    assert lists, "no n-best lists in rerank/data/multi30k"
    for (flavour, n), paths in lists.items():
        test = read_nbest(paths["test_2016"])
        assert test.n_sentences == 1000 and test.sizes.max() == n, (flavour, n)
        assert read_nbest(paths["val"]).n_sentences == 1014
        assert test.feature_names == ["nmt", "nmt_norm", "len"]
    assert os.path.exists(os.path.join(data_dir(), "models", "mlmme-small.pt"))


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
