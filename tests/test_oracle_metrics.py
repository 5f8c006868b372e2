"""`rerank oracle --metric` and `rerank.oracle(metric=...)`: the sentence-level oracle by chrF, TER,
METEOR or an n-best column, checked against sacrebleu's own sentence and corpus scores (properties,
not pinned numbers), the picks' invariance to the order inside a list, and the command's errors."""

from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import CHRF, TER

import rerank
from rerank.errors import InputError
from rerank.formats import read_nbest
from rerank.metrics.registry import QUALITY_METRICS, parse_objective
from tests.cli_helpers import run, write

DATA = Path(__file__).parent / "data" / "joshua10"
JOSHUA = str(DATA / "nbest.joshua")
REF_FILES = [str(DATA / f"ref.{k}") for k in range(2)]
REFS = [Path(r).read_text(encoding="utf-8").splitlines() for r in REF_FILES]
TOL = 1e-9

# sacrebleu's scorers with the toolkit's defaults (TER case-insensitive, as sacrebleu's CLI)
SACRE = {"chrf": lambda: CHRF(), "chrf++": lambda: CHRF(word_order=2), "ter": lambda: TER()}
LOWER = {"ter"}


@pytest.fixture(scope="module")
def nbest():
    return read_nbest(JOSHUA)


def _lists(nbest):
    return [[nbest.hyps[r] for r in range(int(nbest.offsets[i]), int(nbest.offsets[i + 1]))]
            for i in range(nbest.n_sentences)]


@pytest.mark.parametrize("metric", sorted(SACRE))
def test_oracle_picks_sacrebleu_sentence_best_and_beats_first(nbest, metric):
    found = rerank.oracle(nbest, REFS, metric=metric)
    assert found.metric == metric and found.higher_is_better == (metric not in LOWER)
    scorer = SACRE[metric]()
    sign = -1.0 if metric in LOWER else 1.0
    for i, hyps in enumerate(_lists(nbest)):
        refs = [stream[i] for stream in REFS]
        scores = [sign * scorer.sentence_score(h, refs).score for h in hyps]
        pick = int(found.rows[i]) - int(nbest.offsets[i])
        assert found.hypotheses[i] == hyps[pick]
        assert scores[pick] >= max(scores) - TOL                       # the best in the metric's direction
        assert all(s < scores[pick] - TOL for s in scores[:pick])      # ties go to the earlier hypothesis
    firsts = [hyps[0] for hyps in _lists(nbest)]
    oracle_score = SACRE[metric]().corpus_score(found.hypotheses, REFS).score
    first_score = SACRE[metric]().corpus_score(firsts, REFS).score
    assert found.score == pytest.approx(oracle_score, abs=1e-9)
    assert found.first_score == pytest.approx(first_score, abs=1e-9)
    assert sign * found.score >= sign * found.first_score
    assert found.changed == sum(int(r) != int(o) for r, o in zip(found.rows, nbest.offsets[:-1]))
    assert found.signature.startswith({"chrf": "chrF2|", "chrf++": "chrF2++|", "ter": "TER|"}[metric])
    with pytest.raises(AttributeError, match="score"):
        _ = found.bleu


def test_meteor_oracle_picks_the_sentence_best(nbest):
    meteor = rerank.make_metric("meteor", lang="en")
    found = rerank.oracle(nbest, REFS, metric="METEOR", lang="en")
    assert found.metric == "meteor" and found.display == "METEOR"
    for i in (0, 3, 7):
        hyps = _lists(nbest)[i]
        scores = [meteor.corpus_score([h], [[stream[i]] for stream in REFS]) for h in hyps]
        pick = int(found.rows[i]) - int(nbest.offsets[i])
        assert scores[pick] >= max(scores) - TOL and all(s < scores[pick] - TOL for s in scores[:pick])
    assert found.score >= found.first_score
    assert found.score == pytest.approx(meteor.corpus_score(found.hypotheses, REFS), abs=1e-9)


def test_bleu_is_the_sentence_bleu_plus1_oracle(nbest):
    found = rerank.oracle(nbest, REFS, tokenize="none")
    assert found.metric == "bleu" and found.bleu == found.score and found.first_bleu == found.first_score
    assert found.score == pytest.approx(sacrebleu.corpus_bleu(found.hypotheses, REFS, tokenize="none").score)
    assert found.score >= found.first_score


def _sentence_value(metric, nbest, row, i):
    """The sentence-level value the oracle ranks row `row` of sentence `i` by."""
    if metric.startswith("column:"):
        return float(nbest.column(metric[7:])[row])
    hyp, refs = nbest.hyps[row], [[stream[i]] for stream in REFS]
    if metric == "bleu":
        from rerank.metrics.bleu import hypothesis_stats, sentence_bleu_plus1
        return float(sentence_bleu_plus1(hypothesis_stats([hyp], np.array([0, 1]), refs, "none"))[0])
    return SACRE[metric]().sentence_score(hyp, [r[0] for r in refs]).score


@pytest.mark.parametrize("metric", ["bleu", "chrf", "ter", "column:lm_0"])
def test_permuting_a_list_picks_the_same_string(nbest, metric):
    found = rerank.oracle(nbest, REFS, metric=metric, tokenize="none")
    rng = np.random.default_rng(3)
    rows = np.concatenate([rng.permutation(np.arange(nbest.offsets[i], nbest.offsets[i + 1]))
                           for i in range(nbest.n_sentences)])
    shuffled = rerank.oracle(nbest.reorder(rows), REFS, metric=metric, tokenize="none")
    assert shuffled.score == pytest.approx(found.score, abs=1e-9)
    for i, (a, b) in enumerate(zip(found.hypotheses, shuffled.hypotheses)):
        if a != b:  # a tie: both score the same as sentences
            assert _sentence_value(metric, nbest, int(found.rows[i]), i) == pytest.approx(
                _sentence_value(metric, nbest, int(rows[shuffled.rows[i]]), i), abs=1e-9)


COLUMNS = ("0 ||| a b ||| f= 1 g= 2 ||| 3\n0 ||| a c ||| f= 2 g= 5 ||| 2\n0 ||| a d ||| f= 2 g= 5 ||| 2\n"
           "1 ||| d ||| f= 0 g= 1 ||| 1\n1 ||| e ||| f= 7 g= -1 ||| 1\n")


def test_column_oracle_without_references(tmp_path, capsys):
    nbest = write(tmp_path, "n.nbest", COLUMNS)
    out = tmp_path / "picks.txt"
    code, text, err = run(["oracle", nbest, "--metric", "column:g", "-o", out, "--quiet"], capsys)
    assert code == 0, err
    assert out.read_text().splitlines() == ["a c", "d"]        # argmax of g, the earlier of equal ones
    assert f"first-hypothesis column:g = {(2 + 1) / 2:.4f}" in text
    assert f"oracle column:g           = {(5 + 1) / 2:.4f}  (1 of 2 sentences changed)" in text
    assert "signature: column:g (mean over sentences, higher is better)" in text
    code, text, _ = run(["oracle", nbest, "--metric", "column:g", "--lower-better", "g", "-o", out, "--quiet"], capsys)
    assert code == 0 and out.read_text().splitlines() == ["a b", "e"]
    assert f"oracle column:g           = {(2 - 1) / 2:.4f}" in text and "lower is better" in text
    found = rerank.oracle(nbest, metric="column:f", lower_better=True)
    assert found.hypotheses == ["a b", "d"] and found.score == pytest.approx(0.5) and not found.higher_is_better


def test_column_oracle_is_the_argmax_of_the_column(nbest):
    values = nbest.column("lm_0")
    for lower in (False, True):
        found = rerank.oracle(nbest, metric="column:lm_0", lower_better=lower)
        for i in range(nbest.n_sentences):
            block = values[nbest.offsets[i]:nbest.offsets[i + 1]]
            best = int(np.argmin(block) if lower else np.argmax(block))
            assert int(found.rows[i]) == int(nbest.offsets[i]) + best
        assert found.score == pytest.approx(float(np.mean(values[found.rows])))
        assert found.first_score == pytest.approx(float(np.mean(values[nbest.offsets[:-1]])))


@pytest.mark.parametrize("argv, words", [
    (["--metric", "column:nosuch"], ["--metric column:nosuch", "'nosuch'", "f, g"]),
    (["--metric", "blue", "-r", "{ref}"], ["--metric 'blue'", "bleu", "ter", "column:NAME"]),
    (["--metric", "length", "-r", "{ref}"], ["--metric 'length'"]),
    (["--metric", "ter"], ["--metric ter needs references"]),
    (["--metric", "ter", "-r", "{ref}", "--lower-better", "g"], ["--lower-better g"]),
    (["--metric", "column:g", "--lower-better", "f"], ["--lower-better f"]),
])
def test_bad_metric_is_exit_2_and_nothing_written(tmp_path, capsys, argv, words):
    nbest = write(tmp_path, "n.nbest", COLUMNS)
    ref = write(tmp_path, "ref", "a b\nd\n")
    out = tmp_path / "picks.txt"
    code, text, err = run(["oracle", nbest, *[a.replace("{ref}", ref) for a in argv], "-o", out, "--quiet"], capsys)
    assert code == 2 and not out.exists() and text == ""
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err


def test_parse_objective():
    assert parse_objective("TER") == ("metric", "ter")
    assert parse_objective("column:COMET") == ("column", "COMET")
    assert all(parse_objective(m) == ("metric", m) for m in QUALITY_METRICS)
    with pytest.raises(InputError) as caught:
        parse_objective("comet", option="objective")
    assert caught.value.option == "objective" and "column:NAME" in str(caught.value)
    with pytest.raises(InputError):
        rerank.oracle(JOSHUA, metric="ter")                      # references needed
    with pytest.raises(InputError) as caught:
        rerank.oracle(JOSHUA, metric="column:x")
    assert caught.value.option == "metric" and "lm_0" in str(caught.value)
