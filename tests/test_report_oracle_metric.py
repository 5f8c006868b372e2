"""The report's oracle curve by any metric (`rerank report --oracle-metric`, `build_report(oracle_metric=...)`):
the default is the BLEU curve as before; at k = 1 the metric's corpus score of the 1-best, at k = N
`rerank.oracle`'s score; monotone where that is guaranteed; the page names the metric."""

import json
import os
import re

import numpy as np
import pytest
from sacrebleu.metrics import CHRF, TER

import rerank
from rerank.cli import main
from rerank.formats import read_nbest
from rerank.htmlreport import analysis
from rerank.weights import best_rows, model_scores

HERE = os.path.dirname(__file__)
JOSHUA = os.path.join(HERE, "data", "joshua-bn-en", "full")
NBEST = os.path.join(JOSHUA, "output.gold")
REF_FILES = [os.path.join(JOSHUA, f"reference.en.{k}") for k in range(4)]
REF_ARGS = [x for path in REF_FILES for x in ("-r", path)]
LM_WEIGHTS = os.path.join(HERE, "data", "report", "joshua.lm.json")
SMALL = os.path.join(HERE, "data", "joshua10")


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read().splitlines()


REFS = [read(p) for p in REF_FILES]


@pytest.fixture(scope="module")
def nbest():
    return read_nbest(NBEST)


@pytest.fixture(scope="module")
def lm_scores(nbest):
    weights = json.loads(open(LM_WEIGHTS).read())
    w = np.array([weights.get(n, 0.0) for n in nbest.feature_names])
    return model_scores(nbest, w), w


def previous_bleu_curve(nbest, refs, scores=None):
    """The report's oracle curve before --oracle-metric (commit f6e14ae), as it was written there."""
    from rerank.metrics.bleu import corpus_bleu, hypothesis_stats, sentence_bleu_plus1

    offsets = np.asarray(nbest.offsets)
    stats = hypothesis_stats(nbest.hyps, offsets, refs, "13a", False)
    gain = sentence_bleu_plus1(stats)
    k_max = int(np.max(np.diff(offsets)))
    picks = np.zeros((k_max, nbest.n_sentences), dtype=np.int64)
    for i, (lo, hi) in enumerate(zip(offsets[:-1].tolist(), offsets[1:].tolist())):
        rows = np.arange(lo, hi)
        if scores is not None:
            rows = rows[np.argsort(-np.asarray(scores[lo:hi], dtype=np.float64), kind="stable")]
        best = 0
        for j in range(k_max):
            if j < len(rows) and gain[rows[j]] > gain[rows[best]]:
                best = j
            picks[j, i] = rows[best]
    return list(range(1, k_max + 1)), [corpus_bleu(stats[picks[k - 1]].sum(axis=0)) for k in range(1, k_max + 1)]


@pytest.mark.parametrize("ordered", [False, True])
def test_the_default_is_the_previous_bleu_curve(nbest, lm_scores, ordered):
    scores = lm_scores[0] if ordered else None
    assert analysis.oracle_curve(nbest, REFS, scores) == previous_bleu_curve(nbest, REFS, scores)
    assert analysis.oracle_curve(nbest, REFS, scores, metric="bleu") == previous_bleu_curve(nbest, REFS, scores)


def corpus(metric, hyps, nbest, lower=False):
    """The metric's corpus score of one hypothesis per sentence, computed apart from the curve:
    sacrebleu's chrF and TER, the mean of a column's values."""
    if metric == "chrf":
        return CHRF().corpus_score(hyps, REFS).score
    if metric == "ter":
        return TER().corpus_score(hyps, REFS).score
    column = nbest.column(metric[len("column:"):])
    rows = [int(np.flatnonzero((nbest.sentence_of_hyp == i) & np.array([h == hyps[i] for h in nbest.hyps]))[0])
            for i in range(nbest.n_sentences)]
    return float(np.mean(column[rows]))


CASES = [("chrf", False), ("chrf++", False), ("ter", False), ("column:lm_0", False), ("column:lm_0", True)]


@pytest.mark.parametrize("metric, lower", CASES)
def test_ends_are_the_one_best_and_the_oracle(nbest, lm_scores, metric, lower):
    """k = 1: the metric's corpus score of the first hypotheses (the list's order) or of the model's
    1-best (ranked by the weights); k = N: `rerank.oracle`'s score by the same metric."""
    found = rerank.oracle(nbest, REFS, metric=metric, lower_better=lower) if not metric.startswith("column:") \
        else rerank.oracle(nbest, metric=metric, lower_better=lower)
    ks, values = analysis.oracle_curve(nbest, REFS, metric=metric, lower_better=lower)
    assert ks == list(range(1, int(nbest.sizes.max()) + 1))
    assert values[0] == pytest.approx(found.first_score, abs=1e-9) and values[-1] == pytest.approx(found.score, abs=1e-9)
    if metric != "chrf++":
        first = [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]
        assert values[0] == pytest.approx(corpus(metric, first, nbest), abs=1e-9)
    scores, w = lm_scores
    _, ranked = analysis.oracle_curve(nbest, REFS, scores, metric=metric, lower_better=lower)
    one_best = [nbest.hyps[int(r)] for r in best_rows(nbest, w)]
    if metric != "chrf++":
        assert ranked[0] == pytest.approx(corpus(metric, one_best, nbest), abs=1e-9)
    if metric.startswith("column:"):  # the best value of a whole list does not depend on its order
        assert ranked[-1] == pytest.approx(found.score, abs=1e-12)


@pytest.mark.parametrize("metric, lower", [("column:lm_0", False), ("column:lm_0", True), ("column:WordPenalty", False),
                                           ("ter", False)])
def test_monotone_where_guaranteed(nbest, lm_scores, metric, lower):
    """A column's mean of the best value among the top k can only get better as k grows; so can
    corpus TER: a sentence's TER is edits / its references' mean length, which does not depend on the
    hypothesis, so the picks' edits never grow and the corpus TER (sum of edits / sum of lengths)
    never rises. (Corpus BLEU, chrF and METEOR of sentence-level picks are not monotone in general.)"""
    if metric == "ter":
        from rerank.metrics import make_metric
        from rerank.tuning import row_stats

        lengths = row_stats(make_metric("ter"), nbest, REFS)[:, 1]
        assert np.all(np.maximum.reduceat(lengths, nbest.offsets[:-1]) == np.minimum.reduceat(lengths, nbest.offsets[:-1]))
    for scores in (None, lm_scores[0]):
        _, values = analysis.oracle_curve(nbest, REFS, scores, metric=metric, lower_better=lower)
        steps = np.diff(values)
        down = metric == "ter" or lower
        assert np.all(steps <= 1e-12) if down else np.all(steps >= -1e-12)
        assert scores is not None or values[-1] != values[0]  # (ranked by lm_0, column:lm_0's curve is flat)


def test_meteor_curve_ends_at_the_oracle():
    nbest = read_nbest(os.path.join(SMALL, "nbest.joshua"))
    refs = [read(os.path.join(SMALL, f"ref.{k}")) for k in range(4)]
    found = rerank.oracle(nbest, refs, metric="meteor")
    _, values = analysis.oracle_curve(nbest, refs, metric="meteor")
    assert values[0] == pytest.approx(found.first_score) and values[-1] == pytest.approx(found.score)


def report(tmp_path, *extra, metrics="bleu"):
    out = tmp_path / "r.html"
    argv = ["report", *REF_ARGS, "-b", "first=" + str(tmp_path / "first.txt"), "--nbest", "lm=" + NBEST,
            "--weights", LM_WEIGHTS, "--metrics", metrics, "--ar", "20", "--bootstrap", "0", "--examples", "1",
            "-o", str(out), "--quiet", *extra]
    nbest = read_nbest(NBEST)
    (tmp_path / "first.txt").write_text("".join(nbest.hyps[int(i)] + "\n" for i in nbest.offsets[:-1]), encoding="utf-8")
    return main(argv), out


def oracle_section(text):
    return text[text.index('<section id="oracle">'):text.index('<section id="signatures">')]


@pytest.mark.parametrize("extra, display, lower, column", [
    ((), "BLEU", False, None),
    (("--oracle-metric", "chrf"), "chrF", False, None),
    (("--oracle-metric", "TER"), "TER", True, None),
    (("--oracle-metric", "column:lm_0", "--oracle-lower-better", "lm_0"), "column:lm_0", True, "lm_0"),
])
def test_cli_page_names_the_oracle_metric(tmp_path, nbest, lm_scores, extra, display, lower, column):
    code, out = report(tmp_path, *extra)
    assert code == 0
    section = oracle_section(out.read_text(encoding="utf-8"))
    assert f"Oracle {display}:" in section and f"<caption>Oracle {display} of the top k hypotheses</caption>" in section
    assert f"Oracle {display} against k." in section and f"oracle {display}" in section  # the figure's y axis
    assert ("Lower is better" in section) == lower and ("(lower is better)" in section) == lower
    if column:
        assert f"lowest value of the n-best column {column}" in section
    metric = "bleu" if not extra else extra[1].lower()
    _, values = analysis.oracle_curve(nbest, REFS, lm_scores[0], metric=metric, lower_better=lower and bool(column))
    d = 4 if column else 2
    row = re.search(r"<td>lm</td>(.*?)</tr>", section).group(1)
    cells = re.findall(r"<td>([^<]*)</td>", row)
    assert cells[0] == f"{values[0]:.{d}f}" and cells[-1] == f"{values[-1]:.{d}f}"


def test_the_default_page_is_unchanged_but_for_the_caption(tmp_path, nbest, lm_scores):
    code, out = report(tmp_path)
    section = oracle_section(out.read_text(encoding="utf-8"))
    _, values = previous_bleu_curve(nbest, REFS, lm_scores[0])
    assert ("<p class=\"muted\">Oracle BLEU: each sentence's best hypothesis by sentence BLEU+1 among the top k of its "
            "list (ranked by the model score under the given weights), corpus BLEU of those picks; k = 1 is the "
            "system's own 1-best.</p>") in section
    assert f"<td>lm</td><td>{values[0]:.2f}</td>" in section and f"<td>{values[-1]:.2f}</td></tr>" in section


def test_the_python_api_takes_the_oracle_metric():
    ev = rerank.evaluate(REFS, [read_nbest(NBEST).hyps[int(i)] for i in read_nbest(NBEST).offsets[:-1]],
                         {"lm": rerank.Reranked(NBEST, LM_WEIGHTS)}, metrics=["bleu", "ter"], ar=10, bootstrap=0)
    section = oracle_section(ev.to_html(oracle_metric="ter"))
    assert "Oracle TER:" in section and "Lower is better" in section


@pytest.mark.parametrize("extra, nbest_given, message", [
    (("--oracle-metric", "nope"), True, "--oracle-metric 'nope' is not a metric"),
    (("--oracle-metric", "ter", "--oracle-lower-better", "ter"), True, "--oracle-lower-better ter: not the column of"),
    (("--oracle-metric", "chrf"), False, "--oracle-metric: the oracle curve is of n-best lists"),
    (("--oracle-metric", "column:zz"), True, "--oracle-metric column:zz: the n-best list has no column 'zz'"),
])
def test_bad_oracle_options_exit_2_and_write_nothing(tmp_path, capsys, extra, nbest_given, message):
    out = tmp_path / "r.html"
    argv = ["report", *REF_ARGS, "-b", REF_FILES[0], *(["--nbest", NBEST, "--weights", LM_WEIGHTS] if nbest_given else []),
            "--metrics", "bleu", "--ar", "10", "--bootstrap", "0", "-o", str(out), "--quiet", *extra]
    code = main(argv)
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("rerank report:")]
    assert code == 2 and len(err) == 1 and err[0].startswith("rerank report: error: ") and message in err[0], err
    assert not out.exists()
