"""Approximate randomisation, stratified test, bootstrap and Holm against reference behaviour."""

import itertools
import os

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, TER
from sacrebleu.significance import PairedTest

from rerank.metrics import make_metric
from rerank.significance import (approximate_randomization, bootstrap_weights, estimate_ci, holm_bonferroni,
                                 paired_bootstrap, run_statistics)

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")


def lines(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read().splitlines()


@pytest.fixture(scope="module")
def data():
    ref = lines("ref.de")
    bleu, ter = make_metric("bleu"), make_metric("ter")
    hyps = {name: lines(name) for name in ("cap1.de", "cap2.de", "cap3.de", "good.de.run1", "good.de.run2", "good.de.run3")}
    stats = {(m.name, k): m.sentence_stats(h, [ref]) for k, h in hyps.items() for m in (bleu, ter)}
    return ref, hyps, bleu, ter, stats


def test_identical_systems_get_p_one_and_multeval_rule_gets_minimum(data):
    _, _, bleu, _, stats = data
    a = stats[("bleu", "cap1.de")]
    assert approximate_randomization(bleu, a, a, trials=500).p_value == 1.0
    assert approximate_randomization(bleu, a, a, trials=500, multeval_compat=True).p_value == pytest.approx(1 / 501)
    runs = np.stack([stats[("bleu", k)] for k in ("cap1.de", "cap2.de", "cap3.de")])
    assert approximate_randomization(bleu, runs, runs, trials=300).p_value == 1.0


def test_clearly_better_system_is_significant(data):
    ref, hyps, bleu, ter, stats = data
    res = approximate_randomization([bleu, ter], [stats[("bleu", "cap1.de")], stats[("ter", "cap1.de")]],
                                    [stats[("bleu", "good.de.run1")], stats[("ter", "good.de.run1")]], trials=2000)
    # no random swap comes near the real difference: the smallest possible p, 1 / (trials + 1)
    assert [(r.count, r.p_value) for r in res] == [(0, 1 / 2001)] * 2
    for r, metric in zip(res, (BLEU(), TER())):  # observed: sacrebleu's corpus scores, B - A
        diff = metric.corpus_score(hyps["good.de.run1"], [ref]).score - metric.corpus_score(hyps["cap1.de"], [ref]).score
        assert r.observed_diff == pytest.approx(diff, abs=1e-9)


def test_multeval_compat_equals_sacrebleu_paired_ar(data):
    """sacrebleu's --paired-ar draws the same coins for the same seed; p-values must be identical."""
    ref, hyps, bleu, ter, stats = data
    test = PairedTest([("a", hyps["cap1.de"]), ("b", hyps["cap2.de"])], {"BLEU": BLEU(), "TER": TER()}, [ref],
                      test_type="ar", n_samples=1000)
    _, res = test()
    ours = approximate_randomization([bleu, ter], [stats[("bleu", "cap1.de")], stats[("ter", "cap1.de")]],
                                     [stats[("bleu", "cap2.de")], stats[("ter", "cap2.de")]], trials=1000,
                                     seed=12345, multeval_compat=True)
    assert ours[0].p_value == res["BLEU"][1].p_value
    assert ours[1].p_value == res["TER"][1].p_value


def swap_test_count(score, a, b, trials, seed, strict=False):
    """Paired AR count written out plainly: the same coins as the library (one (trials, n) draw),
    each trial's two pseudo-systems summed and scored by `score` one at a time."""
    coins = np.random.default_rng(seed).integers(2, size=(trials, len(a)), dtype=bool)
    observed = abs(score(b.sum(0)) - score(a.sum(0)))
    count = 0
    for coin in coins:
        x = np.where(coin[:, None], b, a).sum(0)
        y = np.where(coin[:, None], a, b).sum(0)
        d = abs(score(x) - score(y))
        count += d > observed + 1e-9 if strict else d >= observed - 1e-9
    return count


def test_p_values_stable_across_seeds(data):
    _, _, bleu, _, stats = data
    a, b = stats[("bleu", "cap1.de")], stats[("bleu", "cap2.de")]
    trials = 4000
    p1 = approximate_randomization(bleu, a, b, trials=trials, seed=1).p_value
    p2 = approximate_randomization(bleu, a, b, trials=trials, seed=2).p_value
    sacre = lambda s: BLEU()._compute_score_from_stats(list(s)).score  # noqa: E731
    count = swap_test_count(sacre, a, b, trials, seed=1)
    assert p1 == (count + 1) / (trials + 1) and 0.05 < p1 < 0.999  # a close pair: p is not at a boundary
    se = np.sqrt(p1 * (1 - p1) / trials)
    assert abs(p1 - p2) < 5 * np.sqrt(2) * se
    assert approximate_randomization(bleu, a, b, trials=trials, seed=1).p_value == p1  # reproducible


def test_one_run_exact_on_tiny_example():
    """R = 1, four sentences, TER with 10 reference words each: B - A edits are d = (3, -1, -1, 1),
    so |observed| = 2 edits, and a swap pattern s (a sign per sentence) gives |s . d|. With s_1 = +1
    that is |3 + t|, t a sum of three signs: 0 once, 2 three times, 4 three times, 6 once; s_1 = -1
    mirrors it. So 14 of the 16 patterns reach 2 (exact p = 14/16) and 8 exceed it (MultEval's
    strict rule: 8/16). The Monte-Carlo count must equal the same coins counted plainly."""
    ter = make_metric("ter")
    a = np.array([[0, 10], [2, 10], [2, 10], [1, 10]], dtype=float)
    b = np.array([[3, 10], [1, 10], [1, 10], [2, 10]], dtype=float)
    d = (b - a)[:, 0]
    patterns = [np.array(s) for s in itertools.product((1, -1), repeat=4)]
    assert sum(abs(s @ d) >= 2 for s in patterns) == 14 and sum(abs(s @ d) > 2 for s in patterns) == 8
    score = ter.score_from_stats
    for compat, exact in ((False, 14 / 16), (True, 8 / 16)):
        count = swap_test_count(score, a, b, trials=20000, seed=0, strict=compat)
        res = approximate_randomization(ter, a, b, trials=20000, seed=0, multeval_compat=compat)
        assert res.count == count and res.observed_diff == pytest.approx(5.0)  # TER: 2 more edits in 40 words
        assert res.p_value == pytest.approx(exact, abs=0.01)


def exact_split_p(metric, a, b):
    """The exact p of the stratified test by enumeration: every way to give each sentence's
    R_A + R_B pooled outputs R_A to X (the rest to Y), each side scored on its average run."""
    ra, rb, n = len(a), len(b), a.shape[1]
    pools = [np.concatenate([a[:, i], b[:, i]]) for i in range(n)]
    avg = lambda s, r: metric.score_from_stats(s / r)  # noqa: E731
    obs = abs(avg(b.sum((0, 1)), rb) - avg(a.sum((0, 1)), ra))
    hits = total = 0
    splits = list(itertools.combinations(range(ra + rb), ra))
    for choice in itertools.product(splits, repeat=n):
        x = sum(pools[i][list(c)].sum(0) for i, c in enumerate(choice))
        y = sum(p.sum(0) for p in pools) - x
        total += 1
        hits += abs(avg(y, rb) - avg(x, ra)) >= obs - 1e-9
    return hits / total


@pytest.mark.parametrize("ra,rb", [(1, 2), (1, 3), (2, 3), (3, 1)])
def test_unequal_runs_exact_on_tiny_example(ra, rb):
    """stratified=True, a one-run (or R_A-run) system against R_B runs: the Monte-Carlo p equals
    the enumerated split test in which each pseudo-system keeps its own run count."""
    ter = make_metric("ter")
    rng = np.random.default_rng(ra * 10 + rb)
    a = rng.integers(0, 6, size=(ra, 3, 2)).astype(float)
    b = rng.integers(2, 8, size=(rb, 3, 2)).astype(float)
    a[..., 1] = b[..., 1] = 10
    res = approximate_randomization(ter, a, b, trials=20000, seed=0, stratified=True)
    exact = exact_split_p(ter, a, b)
    assert 0.02 < exact < 0.98  # not at a boundary
    assert res.p_value == pytest.approx(exact, abs=0.015)


def test_stratified_exact_on_tiny_example():
    """With 2 sentences and R = 2, enumerate all complementary splits and compare with the Monte-Carlo p."""
    ter = make_metric("ter")
    rng = np.random.default_rng(3)
    a = rng.integers(0, 6, size=(2, 2, 2)).astype(float)
    a[..., 1] = 10
    b = rng.integers(3, 9, size=(2, 2, 2)).astype(float)
    b[..., 1] = 10
    from itertools import combinations
    obs = abs(ter.score_from_stats(b.sum((0, 1))) - ter.score_from_stats(a.sum((0, 1))))
    pools = [np.concatenate([a[:, i], b[:, i]]) for i in range(2)]  # (4, k) per sentence
    hits = total = 0
    for c0 in combinations(range(4), 2):
        for c1 in combinations(range(4), 2):
            x = pools[0][list(c0)].sum(0) + pools[1][list(c1)].sum(0)
            y = pools[0].sum(0) + pools[1].sum(0) - x
            total += 1
            hits += abs(ter.score_from_stats(x) - ter.score_from_stats(y)) >= obs - 1e-9
    exact = hits / total
    res = approximate_randomization(ter, a, b, trials=20000, seed=0, stratified=True)
    assert res.p_value == pytest.approx(exact, abs=0.02)


@pytest.mark.parametrize("ra,rb", [(1, 3), (3, 3), (2, 3)])
def test_default_is_the_paired_test_of_the_average_runs(data, ra, rb):
    """The default test averages each system's runs per sentence and swaps the averages: the same
    counts as the paired test given those averages as one run each."""
    _, _, bleu, ter, stats = data
    names = ["cap1.de", "cap2.de", "cap3.de", "good.de.run1"]
    a = [np.stack([stats[(m, k)] for k in names[:ra]]) for m in ("bleu", "ter")]
    b = [np.stack([stats[(m, k)] for k in names[1:1 + rb]]) for m in ("bleu", "ter")]
    got = approximate_randomization([bleu, ter], a, b, trials=2000, seed=5)
    want = approximate_randomization([bleu, ter], [x.mean(0) for x in a], [x.mean(0) for x in b], trials=2000, seed=5)
    assert [(r.count, r.observed_diff) for r in got] == [(r.count, pytest.approx(r.observed_diff)) for r in want]


def test_runs_that_agree_are_one_run_to_the_default_test(data):
    """A system whose three tuning runs give the same output is tested as that one output (the
    default), whereas the stratified split treats the copies as three independent draws and finds
    a difference where the paired test finds none: the reason it is not the default."""
    _, _, bleu, _, stats = data
    a, b = stats[("bleu", "cap1.de")], stats[("bleu", "cap2.de")].copy()
    b[:4] = stats[("bleu", "good.de.run1")][:4]  # a small, non-significant gain
    copies = np.repeat(b[None], 3, axis=0)
    paired = approximate_randomization(bleu, a, b, trials=3000, seed=2)
    assert approximate_randomization(bleu, a, copies, trials=3000, seed=2).count == paired.count
    split = approximate_randomization(bleu, a, copies, trials=3000, seed=2, stratified=True)
    assert paired.p_value > 0.1 and split.p_value < 0.05


def test_run_statistics_and_bootstrap(data):
    _, _, bleu, _, stats = data
    runs = np.stack([stats[("bleu", k)] for k in ("good.de.run1", "good.de.run2", "good.de.run3")])
    weights = bootstrap_weights(np.random.default_rng(0), 500, runs.shape[1])
    assert weights.sum(axis=1).tolist() == [runs.shape[1]] * 500
    rs = run_statistics(bleu, runs, weights)
    per_run = [bleu.score_from_stats(r.sum(0)) for r in runs]
    assert rs.mean == pytest.approx(np.mean(per_run))
    assert rs.s_opt == pytest.approx(np.std(per_run, ddof=1))
    # s_sel: per run, std of the bootstrap scores (sacrebleu's own formula, one resample at a time), averaged
    slow = [np.std([BLEU()._compute_score_from_stats(list((w[:, None] * r).sum(0))).score for w in weights], ddof=1)
            for r in runs]
    assert rs.s_sel == pytest.approx(np.mean(slow), rel=1e-9)
    # paired bootstrap, one resample at a time with sacrebleu's formula: deltas, their interval, the p-value
    sacre = lambda s: BLEU()._compute_score_from_stats(list(s)).score  # noqa: E731
    a, b = stats[("bleu", "cap1.de")], stats[("bleu", "good.de.run1")]
    deltas = np.array([sacre(w @ b) - sacre(w @ a) for w in weights])
    observed = abs(sacre(b.sum(0)) - sacre(a.sum(0)))
    centred = np.abs(deltas) - np.abs(deltas).mean()
    assert paired_bootstrap(bleu, a, b, weights, sacrebleu_compat=True).p_value == \
        (np.count_nonzero(centred > observed) + 1) / 501
    bs = paired_bootstrap(bleu, a, b, weights)  # the p-value that inverts the percentile interval
    tail = min(np.count_nonzero(deltas <= 0), np.count_nonzero(deltas >= 0))
    assert bs.p_value == min(1.0, 2 * (tail + 1) / 501)
    assert (bs.delta_low, bs.delta_high) == pytest.approx(tuple(np.percentile(deltas, [2.5, 97.5])), rel=1e-9)
    assert bs.delta_mean == pytest.approx(deltas.mean(), rel=1e-9)
    mean, ci = estimate_ci(np.arange(1000.0))
    assert mean == pytest.approx(499.5) and ci == pytest.approx(0.5 * (974 - 25))


def test_holm_bonferroni():
    assert holm_bonferroni([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm_bonferroni([0.6, 0.6]) == [1.0, 1.0]


def test_multeval_masks_shuffle():
    from rerank.significance import _multeval_masks

    rng = np.random.default_rng(0)
    for runs in (2, 3):
        cx, cy = _multeval_masks(rng, 200, 30, runs)
        assert np.all(cx.sum(-1) == runs) and np.all(cy.sum(-1) == runs)
        # every data point is one coin between A's run pi(k) and B's run: as many A as B outputs overall
        complementary = np.all(cx + cy == 1, axis=-1)
        if runs == 2:
            assert complementary.all()  # pi = pi^-1 for two runs
        else:  # X and Y overlap only under a 3-cycle (P = 2/6) whose 3 coins are not all equal (P = 6/8)
            assert 1 - complementary.mean() == pytest.approx(2 / 6 * 6 / 8, abs=0.02)


def test_dense_splits_agree_with_subset_table(data, monkeypatch):
    """Beyond MAX_SUBSETS splits the test draws random ranks instead of table rows: the same test,
    so the p-values agree within Monte-Carlo noise."""
    import rerank.significance as sig

    _, _, bleu, _, stats = data
    a = np.stack([stats[("bleu", k)] for k in ("cap1.de", "cap2.de")])
    b = np.stack([stats[("bleu", k)] for k in ("cap2.de", "cap3.de", "cap3.de")])
    table = approximate_randomization(bleu, a, b, trials=4000, seed=1, stratified=True).p_value
    monkeypatch.setattr(sig, "MAX_SUBSETS", 1)
    dense = approximate_randomization(bleu, a, b, trials=4000, seed=1, stratified=True).p_value
    assert 0.02 < table < 0.98
    assert abs(table - dense) < 5 * np.sqrt(2 * table * (1 - table) / 4000)


def test_multeval_compat_with_runs_gives_smaller_p_under_run_variance():
    """Strong optimizer instability (run offsets): MultEval's run-balanced, non-complementary shuffle
    sees little chance variation and reports a far smaller p than Clark et al.'s complementary split."""
    ter = make_metric("ter")
    rng = np.random.default_rng(1)
    n = 60
    base = rng.integers(0, 10, size=n)

    def system(extra):
        runs = [np.stack([base + off + rng.integers(0, 3, size=n) + extra, np.full(n, 20)], 1) for off in (0, 6, 12)]
        return np.stack(runs).astype(float)

    a, b = system(0), system(rng.random(n) < 0.3)
    correct = approximate_randomization(ter, a, b, trials=3000, seed=3, stratified=True)
    compat = approximate_randomization(ter, a, b, trials=3000, seed=3, multeval_compat=True)
    assert correct.observed_diff == compat.observed_diff
    assert correct.p_value > 0.5 and compat.p_value < 0.25 * correct.p_value


def test_paired_bootstrap_equals_sacrebleu_paired_bs(data):
    """Same seed, same resamples: mean, 95% CI and (with sacrebleu_compat) p-value equal sacrebleu's --paired-bs."""
    ref, hyps, bleu, ter, stats = data
    test = PairedTest([("a", hyps["cap1.de"]), ("b", hyps["cap2.de"])], {"BLEU": BLEU(), "TER": TER()}, [ref],
                      test_type="bs", n_samples=500)
    _, res = test()
    weights = bootstrap_weights(np.random.default_rng(12345), 500, len(ref))
    for name, metric in (("BLEU", bleu), ("TER", ter)):
        key = metric.name
        ours = paired_bootstrap(metric, stats[(key, "cap1.de")], stats[(key, "cap2.de")], weights,
                                sacrebleu_compat=True)
        theirs = res[name][1]
        assert ours.p_value == pytest.approx(theirs.p_value)
        assert ours.mean == pytest.approx(theirs.mean, abs=1e-6)  # sacrebleu sums float32 statistics
        assert ours.ci == pytest.approx(theirs.ci, abs=1e-6)


@pytest.mark.parametrize("runs", [3, 7])
def test_multeval_compat_single_run_system_is_broadcast_like_r_copies(data, runs):
    """--multeval-compat: a one-run system against R runs is tested as its statistics copied R
    times, as MultEval given the same file R times (subset tables for R <= 6, dense masks otherwise).
    The default test does not do this (test_unequal_runs_exact_on_tiny_example; the copies make
    the test anti-conservative, tests/test_calibration.py)."""
    _, _, bleu, ter, stats = data
    names = ["cap2.de", "cap3.de", "cap2.de", "cap2.de", "cap3.de", "cap3.de", "cap2.de"][:runs]
    multi = [np.stack([stats[(m, k)] for k in names]) for m in ("bleu", "ter")]
    one = [stats[(m, "cap1.de")] for m in ("bleu", "ter")]
    copies = [np.repeat(s[None], runs, axis=0) for s in one]
    options = dict(trials=600, seed=4, multeval_compat=True)
    for a, b, a_copied, b_copied in ((one, multi, copies, multi), (multi, one, multi, copies)):
        got = approximate_randomization([bleu, ter], a, b, **options)
        want = approximate_randomization([bleu, ter], a_copied, b_copied, **options)
        assert [(r.count, r.p_value, r.observed_diff) for r in got] == \
            [(r.count, r.p_value, r.observed_diff) for r in want]
        assert 0 < got[0].count < 600, got  # a close comparison: the counts say something


def test_multeval_compat_refuses_different_run_counts(data):
    _, _, bleu, _, stats = data
    two = np.stack([stats[("bleu", k)] for k in ("cap1.de", "cap2.de")])
    three = np.stack([stats[("bleu", k)] for k in ("cap1.de", "cap2.de", "cap3.de")])
    with pytest.raises(ValueError, match="same number of runs"):
        approximate_randomization(bleu, two, three, trials=10, multeval_compat=True)
    assert 0 < approximate_randomization(bleu, two, three, trials=200).p_value <= 1  # the default test takes it


def test_single_run_paired_bootstrap_equals_r_copies(data):
    _, _, bleu, _, stats = data
    multi = np.stack([stats[("bleu", k)] for k in ("good.de.run1", "good.de.run2", "good.de.run3")])
    one = stats[("bleu", "cap2.de")]
    weights = bootstrap_weights(np.random.default_rng(2), 300, one.shape[0])
    got = paired_bootstrap(bleu, one, multi, weights)
    want = paired_bootstrap(bleu, np.repeat(one[None], 3, axis=0), multi, weights)
    assert got.p_value == want.p_value
    for field in ("mean", "ci", "delta_mean", "delta_low", "delta_high"):
        assert getattr(got, field) == pytest.approx(getattr(want, field), rel=1e-12)
