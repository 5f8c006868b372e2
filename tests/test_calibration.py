"""Calibration of the significance tests under the null: a fast, seeded version of
benchmarks/bench_calibration.py (docs/evaluation.md, "Calibration").

Null model: the first 300 sentences of the shipped Multi30k test_2016 20-best list; each run of
each system picks one of a sentence's first 4 hypotheses uniformly at random, so the two systems
of a pair are exchangeable sentence by sentence. Correlated runs: a system's runs share its picks
except on the sentences where a run re-draws (10%), as tuning runs agree on most sentences. A
calibrated test rejects about alpha of such pairs: here the default tests' rejection rate at 0.05
must lie in the binomial 99% band, for BLEU and TER, one run each, three runs each (independent
or correlated), and a one-run baseline against three-run systems.
"""

import os

import numpy as np
import pytest
from scipy.stats import binom

from rerank.formats import read_nbest
from rerank.io import iter_lines
from rerank.metrics import make_metric
from rerank.evaluation import evaluate_systems
from rerank.significance import approximate_randomization, bootstrap_weights, paired_bootstrap

DATA = os.path.join(os.path.dirname(__file__), "..", "rerank", "data", "multi30k")
SENTENCES, TOP = 300, 4
SIMS, TRIALS, RESAMPLES = 300, 200, 200
MULTEVAL_SIMS = 150  # MultEval's rules on a deterministic baseline: far outside the band with fewer
ALPHA = 0.05
# runs of A (the baseline), runs of B, correlated runs
LAYOUTS = [(1, 1, False), (3, 3, False), (1, 3, False), (3, 3, True)]
REDRAW = 0.1


@pytest.fixture(scope="module")
def data():
    nb = read_nbest(os.path.join(DATA, "optimised.test_2016.20best.gz"))
    refs = [line for _, line in iter_lines(os.path.join(DATA, "test_2016_flickr.de.gz"))][:SENTENCES]
    hyps = [[nb.hyps[int(nb.offsets[i]) + j] for i in range(SENTENCES)] for j in range(TOP)]  # hyps[j][i]
    metrics = [make_metric("bleu"), make_metric("ter")]
    stats = [np.stack([m.sentence_stats(h, [refs]) for h in hyps], axis=1) for m in metrics]  # (n, TOP, k)
    return refs, hyps, metrics, stats


def picks_of(rng, runs, correlated):
    """(runs, n) picks: independent, or a system's picks re-drawn by each run on REDRAW of the sentences."""
    if not correlated:
        return rng.integers(TOP, size=(runs, SENTENCES))
    base = rng.integers(TOP, size=SENTENCES)
    return np.where(rng.random((runs, SENTENCES)) < REDRAW, rng.integers(TOP, size=(runs, SENTENCES)), base)


def gather(stats, picks):
    """Each metric's statistics (R, n, k) of runs that pick hypothesis picks[r, i] of sentence i."""
    rows = np.arange(picks.shape[1])[None, :]
    return [s[rows, picks] for s in stats]


@pytest.fixture(scope="module")
def null_p(data):
    """{(layout, test): p-values (SIMS, metrics)} of simulated null pairs, every pair with its own seed."""
    _, _, metrics, stats = data
    out = {}
    for li, layout in enumerate(LAYOUTS):
        ra, rb, correlated = layout
        cell = {"ar": [], "bs": [], "ar_stratified": [], "ar_multeval": []}
        for s in range(SIMS):
            rng = np.random.default_rng([20240, li, s])
            a, b = gather(stats, picks_of(rng, ra, correlated)), gather(stats, picks_of(rng, rb, correlated))
            seed = int(rng.integers(1, 2**31))
            cell["ar"].append([r.p_value for r in approximate_randomization(metrics, a, b, trials=TRIALS, seed=seed)])
            weights = bootstrap_weights(np.random.default_rng(seed), RESAMPLES, SENTENCES)
            cell["bs"].append([paired_bootstrap(m, x, y, weights).p_value for m, x, y in zip(metrics, a, b)])
            if ra * rb > 1:  # one run each: the stratified split is the paired test
                res = approximate_randomization(metrics, a, b, trials=TRIALS, seed=seed, stratified=True)
                cell["ar_stratified"].append([r.p_value for r in res])
            if layout == (1, 3, False) and s < MULTEVAL_SIMS:
                res = approximate_randomization(metrics, a, b, trials=TRIALS, seed=seed, multeval_compat=True)
                cell["ar_multeval"].append([r.p_value for r in res])
        out.update({(layout, test): np.array(v) for test, v in cell.items() if v})
    return out


def band(alpha=ALPHA, sims=SIMS):
    lo, hi = binom.interval(0.99, sims, alpha)
    return int(lo), int(hi)


def assert_in_band(null_p, layout, test):
    lo, hi = band()
    rejected = (null_p[(layout, test)] < ALPHA).sum(axis=0)
    for metric, count in zip(("bleu", "ter"), rejected):
        assert lo <= count <= hi, (f"{test} {layout}, {metric}: {count}/{SIMS} rejected at {ALPHA}, "
                                   f"99% band [{lo}, {hi}]")


@pytest.mark.parametrize("test", ["ar", "bs"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: f"{x[0]}v{x[1]}" + ("-correlated" if x[2] else ""))
def test_default_tests_reject_alpha_under_the_null(null_p, layout, test):
    """The default AR (paired, each system's runs averaged per sentence) and the default bootstrap
    (p inverting the percentile interval) reject within the 99% band of alpha, whatever the run
    counts and however alike a system's runs are. A one-run baseline broadcast as R copies (the
    old rule), or sacrebleu's bootstrap p-value, rejects far more."""
    assert_in_band(null_p, layout, test)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: f"{x[0]}v{x[1]}" + ("-correlated" if x[2] else ""))
def test_marks_need_both_tests_and_stay_at_or_below_alpha(null_p, layout):
    """A mark needs the randomisation test and the bootstrap to reject: under the null it is set
    at most as often as either test rejects, so no more than the band's upper end allows."""
    _, hi = band()
    both = ((null_p[(layout, "ar")] < ALPHA) & (null_p[(layout, "bs")] < ALPHA)).sum(axis=0)
    assert (both <= hi).all() and (both <= (null_p[(layout, "ar")] < ALPHA).sum(axis=0)).all(), both


@pytest.mark.parametrize("layout", [(3, 3, False), (1, 3, False)], ids=["3v3", "1v3"])
def test_stratified_split_is_exact_for_independent_runs(null_p, layout):
    assert_in_band(null_p, layout, "ar_stratified")


def test_stratified_split_is_anti_conservative_for_correlated_runs(null_p):
    """Runs that agree on most sentences are near-copies, which the split of the pooled outputs
    counts as independent draws: equal systems are rejected clearly more often than alpha. That
    is why `stratified` is not the default."""
    _, hi = band()
    rejected = (null_p[((3, 3, True), "ar_stratified")] < ALPHA).sum(axis=0)
    assert (rejected > max(hi, 2 * ALPHA * SIMS)).all(), rejected


def test_multeval_rules_are_anti_conservative_for_a_deterministic_baseline(null_p):
    """MultEval given a one-run baseline as R copies treats them as R independent runs: the
    baseline's sentence-level variance is underestimated and equal systems are rejected clearly
    more often than alpha. That is why `multeval_compat` is not the default."""
    _, hi = band(sims=MULTEVAL_SIMS)
    rejected = (null_p[((1, 3, False), "ar_multeval")] < ALPHA).sum(axis=0)
    assert (rejected > max(hi, 2 * ALPHA * MULTEVAL_SIMS)).all(), rejected


def text_runs(hyps, picks):
    return [[hyps[j][i] for i, j in enumerate(run)] for run in picks]


@pytest.mark.parametrize("extra_runs", [(3,), (3, 2)], ids=["with-3-run-system", "with-3-and-2-run-systems"])
def test_pair_p_values_do_not_depend_on_the_table(data, extra_runs):
    """A pair's AR p and bootstrap p are those of the pair alone when systems with other run
    counts are added and the metrics are added or reordered, and equal the pair test on the
    pair's own statistics."""
    refs, hyps, metrics, stats = data
    rng = np.random.default_rng(7)
    picks = {"baseline": rng.integers(TOP, size=(1, SENTENCES)), "B": rng.integers(TOP, size=(3, SENTENCES)),
             "E": rng.integers(TOP, size=(1, SENTENCES))}
    for k, r in enumerate(extra_runs):
        picks[f"X{k}"] = rng.integers(TOP, size=(r, SENTENCES))
    texts = {name: text_runs(hyps, p) for name, p in picks.items()}
    options = {"ar": TRIALS, "bootstrap": RESAMPLES, "seed": 99, "lang": "de"}
    full = evaluate_systems([refs], texts["baseline"], {k: v for k, v in texts.items() if k != "baseline"},
                            metrics=["ter", "bleu"], **options)
    weights = bootstrap_weights(np.random.default_rng(99), RESAMPLES, SENTENCES)
    for name in ("B", "E"):
        alone = evaluate_systems([refs], texts["baseline"], {name: texts[name]}, metrics=["bleu"], **options)
        a, b = gather(stats, picks["baseline"]), gather(stats, picks[name])
        direct = approximate_randomization(metrics, a, b, trials=TRIALS, seed=99)
        for i, m in enumerate(("bleu", "ter")):
            cell = full.cells[(name, m)]
            assert cell.p == direct[i].p_value, (name, m)
            assert cell.bs_p == paired_bootstrap(metrics[i], a[i], b[i], weights).p_value, (name, m)
            if m == "bleu":
                assert (alone.cells[(name, m)].p, alone.cells[(name, m)].bs_p) == (cell.p, cell.bs_p), name
