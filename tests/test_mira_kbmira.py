"""k-best batch MIRA: hope/fear, the update worked by hand, background, averaging, seeds, quality."""

import math

import numpy as np
import pytest
import sacrebleu

from mira.kbmira import kbmira_stats
from rerank.tuning import TuningData, bleu_metric, merge_duplicates, prepare
from mira.kbmira import KBMira, kbmira, sentence_bleu_bg
from rerank.nbest import NBestList, segment_argmax
from tests.mira_helpers import joshua, list_with_reference


def _data(rows_stats, features, sizes=None):
    """TuningData from hand-made sacrebleu-layout statistics (no text needed)."""
    features = np.asarray(features, dtype=float)
    sizes = sizes or [len(features)]
    offsets = np.r_[0, np.cumsum(sizes)]
    nbest = NBestList(offsets, [f"h{j}" for j in range(len(features))], features,
                      [f"f{k}" for k in range(features.shape[1])])
    from rerank.tuning import TuningMetric
    from rerank.bleu import corpus_bleu, corpus_bleu_batch

    metric = TuningMetric("bleu", np.asarray(rows_stats, dtype=float), corpus_bleu_batch, exact=corpus_bleu)
    return TuningData(nbest, np.arange(len(features)), metric, np.ones(features.shape[1], bool), len(features))


# sacrebleu layout: [sys_len, ref_len, correct1-4, total1-4]
GOOD = [2, 2, 2, 1, 0, 0, 2, 1, 0, 0]   # both words right
BAD = [2, 2, 0, 0, 0, 0, 2, 1, 0, 0]    # both words wrong


def test_background_bleu_by_hand():
    K = kbmira_stats(np.array([GOOD, BAD], dtype=float))
    bleu = sentence_bleu_bg(K, np.ones(9))
    # GOOD + ones: all precisions 1, lengths 3 and 3 -> exp(0) * 3
    assert bleu[0] == pytest.approx(3.0)
    # BAD + ones: precisions 1/3, 1/2, 1, 1 -> exp(log(1/6) / 4) * 3
    assert bleu[1] == pytest.approx(3.0 * 6 ** -0.25)
    # brevity: a 1-word hypothesis against a 4-word reference is penalised by exp(1 - R/H)
    short = kbmira_stats(np.array([[1, 4, 1, 0, 0, 0, 1, 0, 0, 0]], dtype=float))
    S = short[0] + 1
    expected = math.exp(np.mean(np.log(S[:4] / S[4:8])) + 1 - S[8] / S[4]) * S[8]
    assert sentence_bleu_bg(short, np.ones(9))[0] == pytest.approx(expected)


def test_hope_fear_model_selection_on_hand_made_list():
    # three hypotheses: 0 is the model's favourite but bad, 1 is good, 2 is bad and disfavoured
    data = _data([BAD, GOOD, BAD], [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    state = KBMira(data, np.array([2.0, -2.0]))
    hope, fear, model, bleu, scores = state.hope_fear(0)
    assert list(scores) == [2.0, 0.0, -2.0]
    # hope: max(2 + 1.917, 0 + 3, -2 + 1.917) -> 0 ; fear: max(2 - 1.917, -3, -3.917) -> 0
    assert (hope, fear, model) == (0, 0, 0)
    state.w = np.array([0.5, -0.5])
    hope, fear, model, bleu, _ = state.hope_fear(0)
    # hope: max(0.5 + 1.917, 3, ...) -> 1 ; fear: max(0.5 - 1.917, -3, -0.5 - 1.917) -> 0
    assert (hope, fear, model) == (1, 0, 0)
    # ties go to the first hypothesis: two identical rows
    tie = _data([GOOD, GOOD], [[0.0, 0.0], [0.0, 0.0]])
    assert KBMira(tie).hope_fear(0)[:3] == (0, 0, 0)


def test_mira_step_worked_by_hand():
    # w = 0; hope = GOOD (bleu 3), fear = BAD (bleu 3 * 6^-1/4); d = (1, -1), |d|^2 = 2
    delta = 3.0 - 3.0 * 6 ** -0.25
    for C, eta in ((0.01, 0.01), (1.0, delta / 2)):
        state = KBMira(_data([GOOD, BAD], [[1.0, 0.0], [0.0, 1.0]]), C=C)
        loss = state.visit(0)
        assert loss == pytest.approx(delta)
        np.testing.assert_allclose(state.w, [eta, -eta])
        np.testing.assert_allclose(state.average(), [eta, -eta])
        # background: 0.999 * ones + statistics of the hope (matches 2 1 0 0, counts 2 1 0 0, ref 2)
        np.testing.assert_allclose(state.bg, 0.999 + np.array([2, 1, 0, 0, 2, 1, 0, 0, 2]))
    # margin already satisfied: no update, but the background still moves
    state = KBMira(_data([GOOD, BAD], [[1.0, 0.0], [0.0, 1.0]]), np.array([2.0, -2.0]))
    # hope = 0, fear = argmax(2 - 3, -2 - 1.92) = 0 -> hope == fear: nothing at all
    assert state.visit(0) == 0.0 and state.n_updates == 0
    np.testing.assert_allclose(state.bg, np.ones(9))
    state = KBMira(_data([GOOD, BAD], [[1.0, 0.0], [0.0, 1.0]]), np.array([0.6, 0.0]))
    # hope 0 (0.6 + 3), fear 1 (-1.92 vs 0.6 - 3 = -2.4); loss = 1.083 - 0.6 > 0 -> update
    assert state.visit(0) == pytest.approx(delta - 0.6)
    eta = min(0.01, (delta - 0.6) / 2)
    np.testing.assert_allclose(state.w, [0.6 + eta, -eta])


def test_model_background_uses_model_one_best():
    data = _data([GOOD, BAD], [[0.0, 0.0], [1.0, 0.0]])
    state = KBMira(data, np.array([1.0, 0.0]), model_bg=True)
    # model 1-best is row 1 (BAD); hope is row 0 (0 + 3 > 1 + 1.92); fear is row 1
    state.visit(0)
    np.testing.assert_allclose(state.bg, 0.999 + kbmira_stats(np.array([BAD], float))[0])


def test_averaging_counts_only_update_steps():
    data = _data([GOOD, BAD, GOOD, BAD], [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], sizes=[2, 2])
    state = KBMira(data, C=0.01)
    state.visit(0)
    w1 = state.w.copy()
    state.visit(1)
    w2 = state.w.copy()
    assert state.n_updates == 2
    np.testing.assert_allclose(state.average(), (w1 + w2) / 2)


def test_fixed_features_keep_their_weight():
    nbest, refs = joshua(0, 20)
    data = prepare(nbest, refs, fix=["lm_0", "WordPenalty"])
    w0 = np.zeros(len(data.feature_names))
    w0[data.feature_names.index("lm_0")] = 0.3
    res = kbmira(data, w0, epochs=5, seed=1)
    assert res.weights[data.feature_names.index("lm_0")] == pytest.approx(0.3)
    assert res.weights[data.feature_names.index("WordPenalty")] == 0.0
    assert np.any(res.weights[data.tuned] != 0)


def test_tuning_score_equals_sacrebleu_of_the_one_best():
    nbest, refs = joshua(0, 50)
    data = prepare(nbest, refs, tokenize="none")
    res = kbmira(data, epochs=10, seed=1)
    rows = data.best_rows(res.weights)
    one_best = [data.nbest.hyps[int(r)] for r in rows]
    assert res.best_score == pytest.approx(sacrebleu.corpus_bleu(one_best, refs, tokenize="none").score, abs=1e-9)
    assert res.history[res.best_epoch - 1]["score"] == res.best_score


def test_tuned_beats_uniform_and_initial_on_joshua_tuning_half():
    nbest, refs = joshua(0, 50)
    data = prepare(nbest, refs)
    uniform = data.evaluate(np.ones(len(data.feature_names)))
    res = kbmira(data, seed=1)
    assert res.best_score > uniform + 1.0
    assert res.best_score > res.initial_score
    assert len(res.history) == 60 and res.best_score == max(h["score"] for h in res.history)


def test_feature_equal_to_sentence_bleu_leads_to_the_oracle():
    nbest, refs = list_with_reference()
    data = prepare(nbest, refs)
    assert data.evaluate(np.zeros(3)) < 50 and data.evaluate(np.ones(3)) < 50
    res = kbmira(data, seed=1)
    rows = data.best_rows(res.weights)
    sbleu = data.features[:, 1]
    oracle = np.maximum.reduceat(sbleu, data.offsets[:-1])
    np.testing.assert_array_equal(sbleu[rows], oracle)
    assert res.best_score == pytest.approx(100.0)


def test_seeds_make_runs_identical():
    nbest, refs = joshua(0, 30)
    data = prepare(nbest, refs)
    a, b = kbmira(data, epochs=8, seed=7), kbmira(data, epochs=8, seed=7)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.history == b.history
    c = kbmira(data, epochs=8, seed=8)
    assert not np.array_equal(a.weights, c.weights)


def test_duplicates_merged_only_when_string_and_features_agree():
    feats = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [0.0, 2.0], [1.0, 2.0], [1.0, 2.0]])
    hyps = ["a b", "a b", "a c", "a b", "a b", "a b"]
    nbest = NBestList(np.array([0, 4, 6]), hyps, feats, ["x", "y"])
    kept = merge_duplicates(nbest)
    # sentence 0: row 1 repeats row 0; row 2 differs in string, row 3 in features; sentence 1: row 5 repeats 4
    assert kept.tolist() == [0, 2, 3, 4]


def test_every_distinct_hypothesis_takes_part():
    """Long lists with repeated strings: only exact (string, features) copies are merged, and a
    hypothesis that shares its features with another (but not its string) still becomes hope."""
    nbest, refs = joshua(0, 10)
    rng = np.random.default_rng(0)
    hyps, feats = [], []
    for i in range(10):
        block = list(nbest.hyps[nbest.sentence(i)]) * 10          # ~80 hypotheses, strings repeat
        f = rng.normal(size=(len(block), 2))
        block += [block[0], refs[0][i]]                           # an exact copy of row 0, and the
        f = np.vstack([f, f[0], f[3]])                            # reference with row 3's features
        hyps.append(block)
        feats.append(f)
    nb = NBestList.from_lists(hyps, feats, ["a", "b"])
    data = prepare(nb, refs)
    assert data.nbest.n_hyps == nb.n_hyps - 10                   # only the exact copies went
    distinct = sum(len(set(zip(nb.hyps[nb.sentence(i)], map(tuple, nb.features[nb.sentence(i)])))) for i in range(10))
    assert data.nbest.n_hyps == distinct
    state = KBMira(data)
    assert all(data.nbest.hyps[int(data.offsets[i]) + state.hope_fear(i)[0]] == refs[0][i] for i in range(10))
    assert all(state.hope_fear(i)[0] == len(state.F[i]) - 1 for i in range(10))


def test_segment_views_match_the_whole_list():
    nbest, refs = joshua(0, 20)
    data = prepare(nbest, refs)
    state = KBMira(data, np.linspace(-1, 1, len(data.feature_names)))
    whole = segment_argmax(data.features @ state.w, data.offsets)
    assert [data.offsets[i] + state.hope_fear(i)[2] for i in range(20)] == whole.tolist()
    # statistics in kbmira layout come from the same sacrebleu statistics
    stats = bleu_metric(data.nbest, refs).stats
    np.testing.assert_array_equal(np.hstack(state.Kt).T, kbmira_stats(stats))


def test_statistics_computed_once_per_distinct_string_equal_direct_ones():
    from rerank.bleu import hypothesis_stats

    nbest, refs = joshua(0, 10)
    rows = np.concatenate([np.arange(nbest.offsets[i], nbest.offsets[i + 1]).repeat(3) for i in range(10)])
    sizes = np.diff(nbest.offsets) * 3
    tripled = NBestList(np.r_[0, np.cumsum(sizes)], nbest.hyps.take(rows), nbest.features[rows] + np.arange(len(rows))[:, None],
                        nbest.feature_names)
    direct = hypothesis_stats(tripled.hyps, tripled.offsets, refs, tokenize="none")
    np.testing.assert_array_equal(bleu_metric(tripled, refs).stats, direct)


def _naive_kbmira(X, K, offsets, epochs, seed, C=0.01, decay=0.999, model_bg=False):
    """kbmira written as the algorithm notes read, one hypothesis at a time in plain Python."""
    n_sent, n_feats = len(offsets) - 1, len(X[0])
    w, total, n_up, bg = [0.0] * n_feats, [0.0] * n_feats, 0, [1.0] * 9
    rng = np.random.default_rng(seed)
    averages = []

    def sbleu(s):
        t = [s[k] + bg[k] for k in range(9)]
        log_bleu = sum(math.log(t[n]) - math.log(t[4 + n]) for n in range(4)) / 4
        if t[4] < t[8]:
            log_bleu += 1 - t[8] / t[4]
        return math.exp(log_bleu) * t[8]

    for _ in range(epochs):
        for i in rng.permutation(n_sent).tolist():
            rows = range(offsets[i], offsets[i + 1])
            if len(rows) < 2:
                continue
            best = {}
            for j in rows:
                score = sum(a * b for a, b in zip(w, X[j]))
                b = sbleu(K[j])
                for name, value in (("hope", score + b), ("fear", score - b), ("model", score)):
                    if name not in best or value > best[name][0]:
                        best[name] = (value, j, b, score)
            _, h, bh, sh = best["hope"]
            _, f, bf, sf = best["fear"]
            if h == f or not bh > bf:
                continue
            loss = (bh - bf) - (sh - sf)
            if loss > 0:
                d = [a - b for a, b in zip(X[h], X[f])]
                sq = sum(x * x for x in d)
                eta = C if sq == 0 else min(C, loss / sq)
                w = [a + eta * b for a, b in zip(w, d)]
                total = [a + b for a, b in zip(total, w)]
                n_up += 1
            src = K[best["model"][1]] if model_bg else K[h]
            bg = [decay * a + b for a, b in zip(bg, src)]
        averages.append([t / n_up for t in total] if n_up else list(w))
    return np.array(averages)


@pytest.mark.parametrize("model_bg", [False, True])
def test_vectorised_kbmira_equals_a_plain_python_reading_of_the_algorithm(model_bg):
    nbest, refs = joshua(0, 25)
    data = prepare(nbest, refs)
    K = kbmira_stats(data.stats)
    naive = _naive_kbmira(data.features.tolist(), K.tolist(), data.offsets.tolist(), epochs=6, seed=4, model_bg=model_bg)
    seen = []
    res = kbmira(data, epochs=6, seed=4, model_bg=model_bg, on_epoch=lambda rec: seen.append(rec["score"]))
    np.testing.assert_allclose(res.weights, naive[res.best_epoch - 1], rtol=1e-9, atol=1e-12)
    assert seen == [data.evaluate(a) for a in naive]
