"""Tuning and `rerank apply` rank hypotheses identically, near-ties included, and the score `rerank
tune` records for the weights it wrote (`tuned_score`) is the score `rerank apply -r` gives them.

Both rank with rerank.weights.best_rows: w·f summed over the columns from the first (a row's score
depends on its own values only, not on where the row sits in the matrix, so merging duplicates or
reading a block at a time cannot move a near-tie), the first of equal scores winning.
"""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rerank import plugins
from rerank.api import apply
from rerank import nbestfile
from rerank.errors import InputError
from rerank.formats import read_nbest, write_nbest
from rerank.formats.moses import stream as moses_stream
from rerank.metrics import make_metric
from rerank.nbest import NBestList, segment_argmax
from rerank.tuning import Tuner, TunerOutput, normalize, prepare
from rerank.weights import SCORE_ROWS, best_rows, model_scores, window_scores
from tests.cli_helpers import run

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                             HealthCheck.too_slow])
# values whose sums round: decimal fractions, mixed magnitudes, signed zeros, the largest that cannot overflow here
VALUE = st.one_of(st.sampled_from([0.1, 0.2, 0.3, 0.7, 1.1, 1.3, 2.9, -0.6, 1e16, -1e16, 1.0, 0.0, -0.0, 3e-300]),
                  st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))
WEIGHT = st.one_of(st.sampled_from([1.0, -1.0, 0.5, 1 / 3, 0.1, 0.3, 0.9, -0.3, 3.0, 1e-3]),
                   st.floats(-10, 10, allow_nan=False, allow_infinity=False))


@st.composite
def matrices(draw, min_rows=1, max_rows=40):
    width = draw(st.integers(1, 6))
    n = draw(st.integers(min_rows, max_rows))
    return np.array(draw(st.lists(VALUE, min_size=n * width, max_size=n * width))).reshape(n, width)


@SETTINGS
@given(features=matrices(), data=st.data())
def test_a_rows_score_depends_on_its_own_values_only(features, data):
    """The same row scores the same alone, in any block, after any number of rows (window edges
    included): what BLAS's matrix-vector product does not guarantee."""
    w = np.array(data.draw(st.lists(WEIGHT, min_size=features.shape[1], max_size=features.shape[1])))
    scores = window_scores(features, w)
    alone = np.array([window_scores(features[i:i + 1], w)[0] for i in range(len(features))])
    assert np.array_equal(scores, alone)
    pad = data.draw(st.sampled_from([1, 3, SCORE_ROWS - len(features) + 1, SCORE_ROWS - 1]))
    before = np.tile(features[:1], (max(pad, 0), 1))
    assert np.array_equal(window_scores(np.vstack([before, features]), w)[len(before):], scores)
    left_to_right = []  # the documented order: f0*w0 + f1*w1 + ..., one product and one addition at a time
    for row in features:
        total = 0.0
        for f, wk in zip(row, w):
            total += f * wk
        left_to_right.append(total)
    assert np.array_equal(np.array(left_to_right), scores)


@st.composite
def tied_lists(draw):
    """(list, weights): sentences whose hypotheses are copies of one feature vector, its columns
    permuted, one value moved by an ulp, exact duplicates (string and features: merged by tuning),
    or fresh rows; strings from a small set, so that equal strings with other features occur."""
    width = draw(st.integers(2, 5))
    w = np.array(draw(st.lists(WEIGHT, min_size=width, max_size=width)))
    words = ["a", "b", "a b", "b a", "c a b"]
    hyps, rows, sizes = ["x", "y z"], [np.zeros(width), np.ones(width)], [2]  # something to tune
    for _ in range(draw(st.integers(1, 5))):
        base = np.array(draw(st.lists(VALUE, min_size=width, max_size=width)))
        size = draw(st.integers(1, 6))
        for _ in range(size):
            kind = draw(st.sampled_from(["base", "permuted", "ulp", "duplicate", "fresh"]))
            if kind == "duplicate" and rows:
                hyps.append(hyps[-1])
                rows.append(rows[-1].copy())
                continue
            row = base.copy()
            if kind == "permuted":
                row = row[draw(st.permutations(range(width)))]
            elif kind == "ulp":
                k = draw(st.integers(0, width - 1))
                row[k] = np.nextafter(row[k], draw(st.sampled_from([np.inf, -np.inf])))
            elif kind == "fresh":
                row = np.array(draw(st.lists(VALUE, min_size=width, max_size=width)))
            hyps.append(draw(st.sampled_from(words)))
            rows.append(row)
        sizes.append(size)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    names = [f"f{k}" for k in range(width)]
    return NBestList(offsets, hyps, np.array(rows), names), w


def _refs(nbest: NBestList) -> list[list[str]]:
    return [["a b c"] * nbest.n_sentences, ["b a"] * nbest.n_sentences]


@SETTINGS
@given(case=tied_lists())
def test_tuning_and_apply_pick_the_same_rows(case):
    nbest, w = case
    try:
        data = prepare(nbest, _refs(nbest), tokenize="none")
    except InputError:  # nothing to tune (e.g. every feature constant): not this test's subject
        assume(False)
    chosen = best_rows(nbest, w)  # `rerank apply`
    # tuning ranks the merged list: the same input rows (the first of merged duplicates is kept)
    assert np.array_equal(data.kept_rows[data.best_rows(w)], chosen)
    # ... and the first of equal scores wins, by the plain definition
    scores = model_scores(nbest, w)
    for i in range(nbest.n_sentences):
        part = scores[nbest.sentence(i)]
        assert chosen[i] == nbest.offsets[i] + int(np.flatnonzero(part == part.max())[0])
    # the score tuning gives these weights is the one `rerank apply -r` computes for its 1-best
    bleu = make_metric("bleu", tokenize="none")
    assert data.evaluate(w) == bleu.corpus_score([nbest.hyps[int(r)] for r in chosen], _refs(nbest))
    # rescaled weights (tune --normalize) rank by their own sums: tuning and apply still agree
    scaled = normalize(w, "l1", np.ones(len(w), bool))
    assert np.array_equal(data.kept_rows[data.best_rows(scaled)], best_rows(nbest, scaled))


@SETTINGS
@given(case=tied_lists(), block=st.sampled_from([64, 256]))
def test_streamed_apply_picks_the_rows_of_the_whole_list(tmp_path_factory, monkeypatch, case, block):
    """`rerank apply` on a regular Moses file scores it a block at a time: the same 1-best."""
    nbest, w = case
    path = str(tmp_path_factory.mktemp("stream") / "list.nbest")
    write_nbest(nbest, path)
    monkeypatch.setattr("rerank.formats.moses.fast.BLOCK", block)
    layout = moses_stream.scan_moses(path)
    assert layout is not None
    whole = read_nbest(path)
    rows = best_rows(whole, w)
    streamed, seen = [], 0
    for first, chunk, scores in nbestfile.scored_chunks(path, layout, w):
        assert first == seen and np.array_equal(scores, model_scores(whole, w)[whole.offsets[seen]:][:chunk.n_hyps])
        streamed += (segment_argmax(scores, chunk.offsets) + whole.offsets[seen]).tolist()
        seen += chunk.n_sentences
    assert streamed == rows.tolist()


# --- the command line: tune's recorded score is apply's score --------------------------------------

J = "tests/data/joshua10"
REFS = [f"{J}/ref.{k}" for k in range(4)]


def _apply_score(tmp_path, capsys, weights: str, metric: str, nbest: str = f"{J}/nbest.joshua",
                 refs: list[str] = REFS) -> str:
    code, out, err = run(["apply", nbest, "-w", weights, "-o", tmp_path / "best.txt", "--metrics", metric,
                          *[x for r in refs for x in ("-r", r)]], capsys)
    assert code == 0, err
    return out.split(" = ")[1].split()[0]


@pytest.mark.parametrize("metric,tuner,extra", [
    ("bleu", "mira", ["--epochs", "5"]),
    ("bleu", "mira", ["--epochs", "5", "--normalize", "l1"]),
    ("ter", "mira", ["--epochs", "5"]),
    pytest.param("chrf", "pro", [], marks=pytest.mark.neural),  # PRO fits with scikit-learn
])
def test_tuned_score_is_apply_score(tmp_path, capsys, metric, tuner, extra):
    weights = tmp_path / "w.json"
    code, out, err = run(["tune", f"{J}/nbest.joshua", *[x for r in REFS for x in ("-r", r)], "-o", weights,
                          "--tuner", tuner, "--metric", metric, *extra], capsys)
    assert code == 0, err
    meta = json.loads(weights.read_text())["meta"]
    assert _apply_score(tmp_path, capsys, str(weights), metric) == f"{meta['tuned_score']:.2f}"
    # exactly: the same 1-best, the same metric
    nbest = read_nbest(f"{J}/nbest.joshua")
    refs = [open(r, encoding="utf-8").read().splitlines() for r in REFS]
    best = apply(nbest, weights)
    scorer = make_metric(metric)
    scorer.prepare(best + [r for stream in refs for r in stream])
    assert scorer.corpus_score(best, refs) == pytest.approx(meta["tuned_score"], abs=1e-9)


class _FixedTuner(Tuner):
    """Returns the weights it was built for, scored as the real tuners score theirs."""

    weights = np.array([-0.3, 0.9])

    def tune(self, data, w0, *, seed, options, progress=False, log=None):
        return TunerOutput(self.weights, data.evaluate(w0), data.evaluate(self.weights))


def test_tuned_score_is_the_score_of_the_normalized_weights_written(tmp_path, capsys, monkeypatch):
    """--normalize l1 rescales the weights it writes, which moves this near-tie: w = (-0.3, 0.9) ranks
    (1.3, 0.6) above (0.1, 0.2) (or below) by one ulp, w / 1.2 the other way. The recorded score
    must be the written weights' score."""
    tuners = plugins.TUNERS.table()
    monkeypatch.setattr(plugins.TUNERS, "table", lambda: {**tuners, "fixed": _FixedTuner})
    X = np.array([[1.3, 0.6], [0.1, 0.2]])
    w = _FixedTuner.weights
    assert (window_scores(X, w)[0] >= window_scores(X, w)[1]) != (
        window_scores(X, w / 1.2)[0] >= window_scores(X, w / 1.2)[1])  # the example is a near-tie that flips
    nbest = NBestList(np.array([0, 2]), ["the cat sat on the mat", "a dog ran"], X, ["f", "g"])
    path = str(tmp_path / "list.nbest")
    write_nbest(nbest, path)
    ref = tmp_path / "ref"
    ref.write_text("the cat sat on the mat\n")
    weights = tmp_path / "w.json"
    code, out, err = run(["tune", path, "-r", ref, "-o", weights, "--tuner", "fixed", "--normalize", "l1"], capsys)
    assert code == 0, err
    meta = json.loads(weights.read_text())["meta"]
    assert _apply_score(tmp_path, capsys, str(weights), "bleu", path, [str(ref)]) == f"{meta['tuned_score']:.2f}"


def test_merged_duplicates_do_not_move_a_near_tie():
    """Tuning drops the second of two equal rows (sentence 0), so every later row sits one place
    higher in its matrix than in `rerank apply`'s. A BLAS product rounded the last rows of a matrix
    apart: on this near-tie (one vector with its columns permuted) it chose another hypothesis."""
    w = np.array([1 / 3, 0.1, 0.9, 0.3, -0.3, 0.3, 0.3, 1.0])
    tied = [[-0.006, 0.01, 0.1, 2.9, 13.0, 0.1, 0.7, 0.029], [0.1, 0.1, 0.01, 0.029, 13.0, 0.7, 2.9, -0.006],
            [13.0, 2.9, -0.006, 0.1, 0.7, 0.029, 0.01, 0.1], [0.7, 0.029, -0.006, 13.0, 2.9, 0.1, 0.01, 0.1],
            [0.1, 0.1, 13.0, -0.006, 0.7, 2.9, 0.029, 0.01], [0.1, 0.1, 13.0, 2.9, 0.7, -0.006, 0.029, 0.01]]
    features = np.array([[0.0] * 8, [0.0] * 8] + tied)
    hyps = ["x", "x", "a", "b", "a b", "b a", "c a b", "c"]
    nbest = NBestList(np.array([0, 2, 8]), hyps, features, [f"f{k}" for k in range(8)])
    data = prepare(nbest, _refs(nbest), tokenize="none")
    assert data.nbest.n_hyps == 7  # the duplicate is merged
    assert np.array_equal(data.kept_rows[data.best_rows(w)], best_rows(nbest, w))
    bleu = make_metric("bleu", tokenize="none")
    assert data.evaluate(w) == bleu.corpus_score(apply(nbest, dict(zip(nbest.feature_names, w))), _refs(nbest))
