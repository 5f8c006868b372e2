"""k-best batch MIRA: hope/fear, the update worked by hand, background, averaging, seeds, quality."""

import math

import numpy as np
import pytest
import sacrebleu

from rerank.mira.kbmira import KBMira, _bleu_bg_t, kbmira, kbmira_stats
from rerank.nbest import NBestList, segment_argmax
from rerank.tuning import bleu_metric, merge_duplicates, prepare
from tests.mira_helpers import BAD, GOOD, hand_data, joshua, list_with_reference, one_best


def sentence_bleu_bg(K: np.ndarray, bg: np.ndarray) -> np.ndarray:
    """kbmira's background sentence BLEU of every row of K (k, 9) against bg (9,), as KBMira
    computes it for one list (its rows transposed)."""
    return _bleu_bg_t(np.ascontiguousarray(K.T), bg)


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
    data = hand_data([BAD, GOOD, BAD], [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
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
    tie = hand_data([GOOD, GOOD], [[0.0, 0.0], [0.0, 0.0]])
    assert KBMira(tie).hope_fear(0)[:3] == (0, 0, 0)


# --- one update worked by hand --------------------------------------------------------------------
# Three hypotheses of one 2-word reference (sacrebleu layout [sys_len, ref_len, correct1-4, total1-4]):
#   A = GOOD (both words right), B = BAD (both wrong), C = HALF (one word right); features A = (0, 0),
#   B = (1, 0), C = (0, 1). kbmira's statistics [m1-4, c1-4, ref]: A (2 1 0 0, 2 1 0 0, 2),
#   B (0 0 0 0, 2 1 0 0, 2), C (1 0 0 0, 2 1 0 0, 2).
# Background bg = ones: A + bg = (3 2 1 1, 3 2 1 1, 3): precisions 1, R = H = 3 -> BLEU 3.
#   B + bg = (1 1 1 1, 3 2 1 1, 3): mean log precision (log 1/3 + log 1/2) / 4 -> 3 * 6^-1/4 = 1.916829
#   C + bg = (2 1 1 1, 3 2 1 1, 3): (log 2/3 + log 1/2) / 4 = log(1/3) / 4    -> 3 * 3^-1/4 = 2.279507
HALF = [2, 2, 1, 0, 0, 0, 2, 1, 0, 0]
B_A, B_B, B_C = 3.0, 3.0 * 6 ** -0.25, 3.0 * 3 ** -0.25
ABC = ([GOOD, BAD, HALF], [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
STATS_A = np.array([2, 1, 0, 0, 2, 1, 0, 0, 2.0])


@pytest.mark.parametrize("C", [0.01, 10.0])
def test_one_update_worked_by_hand(C):
    # w = (0.5, 0.2): model scores A 0, B 0.5, C 0.2 -> model 1-best B
    # hope = argmax(score + BLEU): A 3, B 2.416829, C 2.479507 -> A
    # fear = argmax(score - BLEU): A -3, B -1.416829, C -2.079507 -> B
    # loss = (3 - 1.916829) - (0 - 0.5) = 1.583171; d = f_A - f_B = (-1, 0), |d|^2 = 1
    # eta = min(C, 1.583171): the cap 0.01, or (C = 10) the whole loss, after which the margin
    # w.(f_A - f_B) = 1.083171 equals the BLEU difference (loss 0)
    # bg <- 0.999 * ones + statistics of the hope A
    state = KBMira(hand_data(*ABC), np.array([0.5, 0.2]), C=C)
    hope, fear, model, bleu, scores = state.hope_fear(0)
    np.testing.assert_allclose(bleu, [B_A, B_B, B_C], rtol=1e-12)
    assert (hope, fear, model) == (0, 1, 1)
    loss = (B_A - B_B) - (0.0 - 0.5)
    assert state.visit(0) == pytest.approx(loss, rel=1e-12)
    eta = min(C, loss)
    np.testing.assert_allclose(state.w, [0.5 - eta, 0.2], rtol=1e-12)
    np.testing.assert_allclose(state.average(), state.w)          # one update: the average is w
    np.testing.assert_allclose(state.bg, 0.999 + STATS_A)
    if C == 10.0:
        assert state.w @ (np.array([0.0, 0.0]) - np.array([1.0, 0.0])) == pytest.approx(B_A - B_B)


def test_second_update_uses_the_moved_background():
    # after the uncapped step above: w1 = (0.5 - 1.583171, 0.2) = (-1.083171, 0.2) and
    # bg1 = (2.999 1.999 .999 .999, 2.999 1.999 .999 .999, 2.999). With it (R = H = 4.999 for all):
    #   A: precisions 1 -> 4.999;  B: (2.999/4.999 * 1.999/2.999)^1/4 -> 4.999 * (1.999/4.999)^1/4 = 3.975260
    #   C: (3.999/4.999 * 1.999/2.999)^1/4 -> 4.271784
    # scores A 0, B -1.083171, C 0.2; hope: 4.999, 2.892089, 4.471784 -> A;
    # fear: -4.999, -5.058431, -4.071784 -> C; loss = (4.999 - 4.271784) + 0.2 = 0.927216,
    # d = f_A - f_C = (0, -1) -> w2 = (-1.083171, 0.2 - 0.927216); average (w1 + w2) / 2;
    # bg2 = 0.999 * bg1 + statistics of A
    state = KBMira(hand_data(*ABC), np.array([0.5, 0.2]), C=10.0)
    state.visit(0)
    w1, bg1 = state.w.copy(), state.bg.copy()
    hope, fear, _, bleu, _ = state.hope_fear(0)
    R = 4.999
    np.testing.assert_allclose(bleu, [R, R * (1.999 / R) ** 0.25, R * (3.999 * 1.999 / (R * 2.999)) ** 0.25], rtol=1e-12)
    assert (hope, fear) == (0, 2)
    loss = (R - bleu[2]) + 0.2
    assert state.visit(0) == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(state.w, [0.5 - (B_A - B_B + 0.5), 0.2 - loss], rtol=1e-12)
    np.testing.assert_allclose(state.average(), (w1 + state.w) / 2, rtol=1e-12)
    np.testing.assert_allclose(state.bg, 0.999 * bg1 + STATS_A, rtol=1e-12)


def test_hope_equal_to_fear_changes_nothing():
    # w = (0, 5): scores A 0, B 0, C 5; hope: 3, 1.917, 7.280 -> C; fear: -3, -1.917, 2.720 -> C.
    # kbmira.cpp updates only `if (!hopeFearEqual && hopeBleu > fearBleu)`, the background too.
    state = KBMira(hand_data(*ABC), np.array([0.0, 5.0]))
    assert state.hope_fear(0)[:3] == (2, 2, 2)
    assert state.visit(0) == 0.0
    np.testing.assert_array_equal(state.w, [0.0, 5.0])
    np.testing.assert_array_equal(state.bg, np.ones(9))
    assert state.n_updates == 0


@pytest.mark.parametrize("bleu_fear", [B_B, B_B + 0.5])
def test_no_update_unless_hope_bleu_exceeds_fear_bleu(bleu_fear):
    # hope_fear cannot return this: hope's and fear's maximality give BLEU_hope - BLEU_fear >=
    # score_fear - score_hope >= BLEU_fear - BLEU_hope, so BLEU_hope >= BLEU_fear. The guard must
    # still refuse (equal BLEU can come from rounding): no step, no background move.
    state = KBMira(hand_data(*ABC), np.array([0.5, 0.2]))
    state.hope_fear = lambda i: (0, 1, 1, np.array([B_B, bleu_fear, B_C]), np.array([0.0, 0.5, 0.2]))
    assert state.visit(0) == 0.0
    np.testing.assert_array_equal(state.w, [0.5, 0.2])
    np.testing.assert_array_equal(state.bg, np.ones(9))


def test_zero_loss_moves_only_the_background():
    # fear's maximality makes loss >= 0, so "loss <= 0" is loss == 0: hope and fear tie in
    # score - BLEU. List [B, A], features B (0, 0), A (1, 0), w = (3 - BLEU_B, 0): score - BLEU is
    # -BLEU_B for both (exact in floating point), fear = the first = B; hope = A (3 - BLEU_B + 3 >
    # BLEU_B). loss = (3 - BLEU_B) - (3 - BLEU_B) = 0: no step, no update counted, bg moves by A.
    data = hand_data([BAD, GOOD], [[0.0, 0.0], [1.0, 0.0]])
    bleu = sentence_bleu_bg(kbmira_stats(data.stats), np.ones(9))
    np.testing.assert_allclose(bleu, [B_B, B_A], rtol=1e-12)
    w0 = np.array([bleu[1] - bleu[0], 0.0])
    state = KBMira(data, w0)
    assert state.hope_fear(0)[:2] == (1, 0)
    assert state.visit(0) == 0.0
    np.testing.assert_array_equal(state.w, w0)
    assert state.n_updates == 0
    np.testing.assert_allclose(state.bg, 0.999 + STATS_A)


def test_equal_features_step_counts_but_does_not_move():
    # hope A and fear B with the same features: |d|^2 = 0, kbmira's min(C, loss / 0) = C times a
    # zero vector; the step still counts for the average (Moses' update() increments it).
    state = KBMira(hand_data([GOOD, BAD], [[1.0, 2.0], [1.0, 2.0]]), np.array([0.3, 0.1]))
    assert state.visit(0) == pytest.approx(B_A - B_B, rel=1e-12)
    assert state.n_updates == 1
    np.testing.assert_array_equal(state.w, [0.3, 0.1])
    np.testing.assert_allclose(state.bg, 0.999 + STATS_A)


def test_model_background_uses_model_one_best():
    data = hand_data([GOOD, BAD], [[0.0, 0.0], [1.0, 0.0]])
    state = KBMira(data, np.array([1.0, 0.0]), model_bg=True)
    # model 1-best is row 1 (BAD); hope is row 0 (0 + 3 > 1 + 1.92); fear is row 1
    state.visit(0)
    np.testing.assert_allclose(state.bg, 0.999 + kbmira_stats(np.array([BAD], float))[0])


def test_averaging_counts_only_update_steps():
    data = hand_data([GOOD, BAD, GOOD, BAD], [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], sizes=[2, 2])
    state = KBMira(data, C=0.01)
    state.visit(0)
    w1 = state.w.copy()
    state.visit(1)
    w2 = state.w.copy()
    assert state.n_updates == 2
    np.testing.assert_allclose(state.average(), (w1 + w2) / 2)


def test_fixed_features_keep_their_weight():
    nbest, refs = joshua(0, 20)
    data = prepare(nbest, refs, fix=["lm_0", "WordPenalty"], tokenize="none")
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
    data = prepare(nbest, refs, tokenize="none")
    ones = np.ones(len(data.feature_names))
    uniform = sacrebleu.corpus_bleu(one_best(nbest, ones), refs, tokenize="none").score
    decoder = sacrebleu.corpus_bleu([nbest.hyps[int(a)] for a in nbest.offsets[:-1]], refs, tokenize="none").score
    assert (round(uniform, 2), round(decoder, 2)) == (24.54, 25.42)      # docs/tuning.md's table
    assert data.evaluate(ones) == pytest.approx(uniform, abs=1e-9)
    res = kbmira(data, seed=1)
    assert res.initial_score == pytest.approx(decoder, abs=1e-9)         # zero weights: the decoder's 1-best
    assert res.best_score == pytest.approx(sacrebleu.corpus_bleu(one_best(nbest, res.weights), refs,
                                                                 tokenize="none").score, abs=1e-9)
    assert res.best_score > uniform + 1.0 and res.best_score > decoder
    assert len(res.history) == 60 and res.best_score == max(h["score"] for h in res.history)


def test_feature_equal_to_sentence_bleu_leads_to_the_oracle():
    nbest, refs = list_with_reference()
    data = prepare(nbest, refs, tokenize="none")
    for w in (np.zeros(3), np.ones(3)):   # both miss the inserted references
        expect = sacrebleu.corpus_bleu(one_best(nbest, w), refs, tokenize="none").score
        assert data.evaluate(w) == pytest.approx(expect, abs=1e-9) and expect < 50
    res = kbmira(data, seed=1)
    rows = data.best_rows(res.weights)
    sbleu = data.features[:, 1]
    oracle = np.maximum.reduceat(sbleu, data.offsets[:-1])
    np.testing.assert_array_equal(sbleu[rows], oracle)
    assert res.best_score == pytest.approx(100.0)


def test_seeds_make_runs_identical():
    nbest, refs = joshua(0, 30)
    data = prepare(nbest, refs, tokenize="none")
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
    data = prepare(nb, refs, tokenize="none")
    assert data.nbest.n_hyps == nb.n_hyps - 10                   # only the exact copies went
    distinct = sum(len(set(zip(nb.hyps[nb.sentence(i)], map(tuple, nb.features[nb.sentence(i)])))) for i in range(10))
    assert data.nbest.n_hyps == distinct
    state = KBMira(data)
    assert all(data.nbest.hyps[int(data.offsets[i]) + state.hope_fear(i)[0]] == refs[0][i] for i in range(10))
    assert all(state.hope_fear(i)[0] == len(state.F[i]) - 1 for i in range(10))


def test_segment_views_match_the_whole_list():
    nbest, refs = joshua(0, 20)
    data = prepare(nbest, refs, tokenize="none")
    state = KBMira(data, np.linspace(-1, 1, len(data.feature_names)))
    whole = segment_argmax(data.features @ state.w, data.offsets)
    assert [data.offsets[i] + state.hope_fear(i)[2] for i in range(20)] == whole.tolist()
    # statistics in kbmira layout come from the same sacrebleu statistics
    stats = bleu_metric(data.nbest, refs, tokenize="none").stats
    np.testing.assert_array_equal(np.hstack(state.Kt).T, kbmira_stats(stats))


def test_statistics_computed_once_per_distinct_string_equal_direct_ones():
    from rerank.metrics.bleu import hypothesis_stats

    nbest, refs = joshua(0, 10)
    rows = np.concatenate([np.arange(nbest.offsets[i], nbest.offsets[i + 1]).repeat(3) for i in range(10)])
    sizes = np.diff(nbest.offsets) * 3
    tripled = NBestList(np.r_[0, np.cumsum(sizes)], nbest.hyps.take(rows), nbest.features[rows] + np.arange(len(rows))[:, None],
                        nbest.feature_names)
    direct = hypothesis_stats(tripled.hyps, tripled.offsets, refs, tokenize="none")
    np.testing.assert_array_equal(bleu_metric(tripled, refs, tokenize="none").stats, direct)


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
    data = prepare(nbest, refs, tokenize="none")
    K = kbmira_stats(data.stats)
    naive = _naive_kbmira(data.features.tolist(), K.tolist(), data.offsets.tolist(), epochs=6, seed=4, model_bg=model_bg)
    seen = []
    res = kbmira(data, epochs=6, seed=4, model_bg=model_bg, on_epoch=lambda rec: seen.append(rec["score"]))
    np.testing.assert_allclose(res.weights, naive[res.best_epoch - 1], rtol=1e-9, atol=1e-12)
    assert seen == [data.evaluate(a) for a in naive]


@pytest.mark.parametrize("case", ["bleu", "model_bg", "fixed", "chrf"])
def test_an_epoch_equals_its_visits_one_at_a_time(case):
    """KBMira.epoch (work arrays made once, the length scaling in the log domain) makes the same
    updates as `visit` sentence by sentence: weights, running total, background and update count
    equal to rounding after two epochs, for BLEU (with --model-bg, with fixed features) and chrF."""
    nbest, refs = joshua(0, 30)
    data = prepare(nbest, refs, tokenize="none", metric="chrf" if case == "chrf" else "bleu",
                   fix=["lm_0"] if case == "fixed" else None)
    w0 = np.linspace(-0.5, 0.5, len(data.feature_names))
    fast = KBMira(data, w0, model_bg=case == "model_bg")
    slow = KBMira(data, w0, model_bg=case == "model_bg")
    rng = np.random.default_rng(4)
    for _ in range(2):
        order = rng.permutation(len(fast.F)).tolist()
        loss = fast.epoch(order)
        expected = sum(slow.visit(i) for i in order if len(slow.F[i]) > 1)
        assert loss == pytest.approx(expected, rel=1e-9)
    assert fast.n_updates == slow.n_updates > 0
    np.testing.assert_allclose(fast.w, slow.w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fast.total, slow.total, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fast.bg, slow.bg, rtol=1e-12)
