"""MERT: envelope and line search against brute force, seeds, other metrics; PRO sampling and fit."""

import math

import numpy as np
import pytest
import sacrebleu
from scipy.optimize import minimize

from rerank.tuning import prepare
from rerank.mira.mert import envelope_breakpoints, line_search_ab, mert
from rerank.mira.pro import pro, sample_pairs
from rerank.metrics.bleu import corpus_bleu_batch, sentence_bleu_plus1
from rerank.nbest import segment_argmax
from tests.mira_helpers import BAD, GOOD, hand_data, joshua, list_with_reference, one_best


def _small(seed, integer=False):
    """6 sentences x 2..7 hypotheses with real BLEU statistics and random features."""
    nbest, refs = joshua(0, 40)
    data = prepare(nbest, refs, tokenize="none")
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 8, 6)
    offsets = np.r_[0, np.cumsum(sizes)]
    stats = data.stats[rng.integers(0, data.nbest.n_hyps, offsets[-1])]
    X = rng.integers(-3, 4, (offsets[-1], 3)).astype(float) if integer else rng.normal(size=(offsets[-1], 3))
    return X, stats, offsets


def _brute_force(X, stats, offsets, w, d):
    """Best corpus BLEU along w + g d by evaluating between every pair of crossing points."""
    a, b = X @ w, X @ d
    points = []
    for i in range(len(offsets) - 1):
        lo, hi = offsets[i], offsets[i + 1]
        for j in range(lo, hi):
            for k in range(j + 1, hi):
                if b[j] != b[k]:
                    points.append((a[k] - a[j]) / (b[j] - b[k]))
    points = np.unique(points)
    probes = np.r_[points[0] - 1.0, (points[1:] + points[:-1]) / 2, points[-1] + 1.0] if len(points) else np.zeros(1)
    scores = [corpus_bleu_batch(stats[segment_argmax(a + g * b, offsets)].sum(axis=0)) for g in probes]
    return max(scores)


@pytest.mark.parametrize("seed", range(6))
def test_line_search_matches_brute_force(seed):
    for integer in (False, True):
        X, stats, offsets = _small(seed, integer)
        rng = np.random.default_rng(100 + seed)
        w, d = rng.normal(size=3), rng.normal(size=3)
        current = corpus_bleu_batch(stats[segment_argmax(X @ w, offsets)].sum(axis=0))
        ls = line_search_ab(X @ w, X @ d, stats, offsets, corpus_bleu_batch, current)
        brute = _brute_force(X, stats, offsets, w, d)
        assert max(ls.interval_objectives.max(), current) == pytest.approx(max(brute, current), abs=1e-9)
        # the chosen step really gives the promised score
        moved = corpus_bleu_batch(stats[segment_argmax(X @ (w + ls.gamma * d), offsets)].sum(axis=0))
        assert moved == pytest.approx(ls.objective, abs=1e-9)
        assert ls.objective >= current - 1e-12


def test_envelope_sequence_matches_sweeping():
    X, stats, offsets = _small(3)
    w, d = np.array([1.0, -0.5, 0.2]), np.array([0.3, 1.0, -0.7])
    a, b = X @ w, X @ d
    first, gam, sent, old, new = envelope_breakpoints(a, b, offsets)
    for i in range(len(offsets) - 1):
        mine = gam[sent == i]
        assert np.all(np.diff(mine) > 0)
        # between breakpoints the recorded line is the arg-max of the sweep
        rows = [first[i]] + new[sent == i].tolist()
        edges = np.r_[-1e6, mine, 1e6]
        for k, row in enumerate(rows):
            g = (edges[k] + edges[k + 1]) / 2
            lo, hi = offsets[i], offsets[i + 1]
            assert lo + int(np.argmax(a[lo:hi] + g * b[lo:hi])) == row


def test_mert_improves_joshua_and_is_seeded():
    nbest, refs = joshua(0, 50)
    data = prepare(nbest, refs, tokenize="none")
    uniform = sacrebleu.corpus_bleu(one_best(nbest, np.ones(len(data.feature_names))), refs, tokenize="none").score
    a = mert(data, seed=3, restarts=3, random_directions=3)
    b = mert(data, seed=3, restarts=3, random_directions=3)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert round(a.initial_score, 2) == 25.42                         # zero weights: the decoder's 1-best
    assert a.best_score == pytest.approx(sacrebleu.corpus_bleu(one_best(nbest, a.weights), refs,
                                                               tokenize="none").score, abs=1e-9)
    assert a.best_score > uniform + 1.0 and a.best_score > a.initial_score
    # the curve never goes down within one start point
    for r in {h["restart"] for h in a.history}:
        scores = [h["score"] for h in a.history if h["restart"] == r]
        assert all(y >= x - 1e-9 for x, y in zip(scores, scores[1:]))


def test_mert_other_metric_chrf():
    nbest, refs = joshua(0, 20)
    data = prepare(nbest, refs, metric="chrf", tokenize="none")
    res = mert(data, seed=1, restarts=2, random_directions=2)
    first = [nbest.hyps[int(a)] for a in nbest.offsets[:-1]]
    assert res.initial_score == pytest.approx(sacrebleu.corpus_chrf(first, refs).score, abs=1e-9)
    assert res.best_score == pytest.approx(sacrebleu.corpus_chrf(one_best(nbest, res.weights), refs).score, abs=1e-9)
    assert res.best_score > res.initial_score


@pytest.mark.neural
def test_tuners_reach_the_oracle_when_a_feature_is_sentence_bleu():
    nbest, refs = list_with_reference()
    data = prepare(nbest, refs, tokenize="none")
    oracle = np.maximum.reduceat(data.features[:, 1], data.offsets[:-1])
    for weights in (mert(data, seed=1, restarts=2, random_directions=2).weights, pro(data, seed=1).weights):
        np.testing.assert_array_equal(data.features[data.best_rows(weights), 1], oracle)


def _kept_gaps(sb, offsets, seed, samples=5000, keep=50, threshold=0.05):
    """Per sentence, the sentence-BLEU gaps PRO keeps, read plainly from the same random numbers
    (sample_pairs draws (sentences, samples, 2) uniforms for a block of up to 256 sentences):
    the `keep` largest of the gaps above the threshold of the distinct pairs drawn (a pair drawn
    again, in either order, counts once)."""
    u = np.random.default_rng(seed).random((len(offsets) - 1, samples, 2))
    kept = []
    for i in range(len(offsets) - 1):
        lo, k = int(offsets[i]), int(offsets[i + 1] - offsets[i])
        pairs = {frozenset((min(int(a * k), k - 1), min(int(b * k), k - 1))) for a, b in u[i]}
        gaps = [abs(sb[lo + min(p)] - sb[lo + max(p)]) for p in pairs]
        kept.append(sorted((g for g in gaps if g > threshold), reverse=True)[:keep])
    return kept


def test_pro_pair_sampling():
    nbest, refs = joshua(0, 30)
    data = prepare(nbest, refs, tokenize="none")
    sb = sentence_bleu_plus1(data.stats)
    j1, j2 = sample_pairs(sb, data.offsets, np.random.default_rng(0), samples=5000, keep=50, threshold=0.05)
    sid = data.nbest.sentence_of_hyp
    assert np.array_equal(sid[j1], sid[j2])                       # pairs never cross sentences
    unordered = {(int(a), int(b)) for a, b in zip(np.minimum(j1, j2), np.maximum(j1, j2))}
    assert len(unordered) == len(j1)                              # no pair twice, in either order
    expect = _kept_gaps(sb, data.offsets, 0)
    counts = np.bincount(sid[j1], minlength=30)
    assert counts.tolist() == [len(g) for g in expect]
    for i in range(30):
        mine = sorted(np.abs(sb[j1[sid[j1] == i]] - sb[j2[sid[j2] == i]]), reverse=True)
        np.testing.assert_array_equal(mine, expect[i])


@pytest.mark.neural
def test_pro_seeded_and_better_than_uniform():
    nbest, refs = joshua(0, 50)
    data = prepare(nbest, refs, tokenize="none")
    a, b = pro(data, seed=5), pro(data, seed=5)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.n_pairs == sum(len(g) for g in _kept_gaps(sentence_bleu_plus1(data.stats), data.offsets, 5))
    tuned = sacrebleu.corpus_bleu(one_best(nbest, a.weights), refs, tokenize="none").score
    uniform = sacrebleu.corpus_bleu(one_best(nbest, np.ones(len(data.feature_names))), refs, tokenize="none").score
    assert a.best_score == pytest.approx(tuned, abs=1e-9) and tuned > uniform


@pytest.mark.neural
@pytest.mark.parametrize("n_sent", [1, 2, 4])
def test_pro_l2_term_is_added_once_for_all_pairs(n_sent):
    """n_sent lists of a right (feature 1) and a wrong (feature 0) hypothesis; keep=1 keeps one pair
    per list, so P = n_sent pairs and 2P examples (x=+1, y=+1), (x=-1, y=-1). The documented
    objective is 2P log(1 + e^-w) + w^2 / (2C); its minimum solves 2P sigmoid(-w) = w / C. At
    w = ln 3, sigmoid(-w) = 1/4, so C = 2 ln(3) / P puts the minimum exactly at w = ln 3: the
    C that gives one weight shrinks as the pairs grow (a per-pair L2 term would need one C)."""
    data = hand_data([GOOD, BAD] * n_sent, [[1.0], [0.0]] * n_sent, sizes=[2] * n_sent)
    res = pro(data, seed=1, samples=50, keep=1, C=2 * math.log(3) / n_sent)
    assert res.n_pairs == n_sent
    assert res.weights[0] == pytest.approx(math.log(3), abs=1e-4)


@pytest.mark.neural
def test_pro_default_C_is_moses_megam_lambda_one():
    """Two lists, two features, default C = 1: the weights minimise MegaM's objective with lambda = 1,
    sum over the 4 examples of log(1 + exp(-y w.x)) + |w|^2 / 2 (scipy on the written-out sum)."""
    right_a, wrong_a, right_b, wrong_b = [1.0, 0.5], [0.0, 0.0], [0.0, 0.0], [0.5, -2.0]
    data = hand_data([GOOD, BAD, BAD, GOOD], [right_a, wrong_a, wrong_b, right_b], sizes=[2, 2])
    res = pro(data, seed=3, samples=50, keep=1)
    diffs = np.array([np.subtract(right_a, wrong_a), np.subtract(right_b, wrong_b)])   # (1, .5), (-.5, 2)

    X, y = np.vstack([diffs, -diffs]), np.r_[1.0, 1.0, -1.0, -1.0]   # (d, +1) and (-d, -1) per pair

    def megam(w):
        return np.logaddexp(0.0, -y * (X @ w)).sum() + 0.5 * w @ w

    best = minimize(megam, np.zeros(2), method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose(res.weights, best, atol=1e-4)
    assert megam(res.weights) == pytest.approx(megam(best), abs=1e-8)
    # the same problem with every pair twice and C = 1/2 has the same minimiser
    doubled = hand_data([GOOD, BAD, BAD, GOOD] * 2, [right_a, wrong_a, wrong_b, right_b] * 2, sizes=[2] * 4)
    np.testing.assert_allclose(pro(doubled, seed=3, samples=50, keep=1, C=0.5).weights, best, atol=1e-4)
