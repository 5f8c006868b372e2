"""Significance tests and variance estimates over per-sentence sufficient statistics.

All tests take statistics arrays (R, n, k): R optimizer runs, n sentences, k statistics of one
metric. Every test of a pair depends on that pair's own statistics (and the seed) only: each
system keeps its own run count, so a comparison does not change when other systems are scored
next to it. Pseudo-systems are matrix products (trials x data points) @ (data points x k),
scored in one vectorised `metric.score_from_stats` call; random draws are made in blocks of rows
(BLOCK_ENTRIES), so memory does not grow with trials x sentences.

- `approximate_randomization`: paired AR (Riezler & Maxwell 2005) of the two systems' average
  runs (one unit per sentence, whatever the run counts); `stratified=True`: Clark et al. (2011)'s
  split of the pooled run outputs, generalised to R_A and R_B runs (exact only for independent
  runs); `multeval_compat=True`: MultEval's rules.
- `paired_bootstrap`: Koehn (2004), with a p-value that inverts its percentile interval
  (`sacrebleu_compat=True`: sacrebleu --paired-bs's rule).
- `run_statistics`: mean over runs, s_opt (std dev over runs) and s_sel (bootstrap std dev of the
  test-set score, mean over runs), as MultEval reports them.
- `holm_bonferroni`: step-down adjustment of a family of p-values.

docs/evaluation.md has the calibration of each test (`benchmarks/bench_calibration.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import overload

import numpy as np

from rerank.metrics.base import Metric
from rerank.options import MAX_RESAMPLES, MAX_TRIALS  # noqa: F401 (the ceilings, here with their tests)
from rerank.progress import Progress, progress_bar


# Comparisons of floating-point differences: pseudo-systems that only re-order a sum must count as equal.
_TOL = 1e-9


def as_runs(stats: np.ndarray) -> np.ndarray:
    """View statistics as (R, n, k): a 2-D (n, k) array is one run."""
    stats = np.asarray(stats, dtype=np.float64)
    if stats.ndim == 2:
        return stats[None]
    if stats.ndim != 3:
        raise ValueError(f"statistics must be (n, k) or (R, n, k), got shape {stats.shape}")
    return stats


def run_scores(metric: Metric, stats: np.ndarray) -> np.ndarray:
    """Corpus score of each run, shape (R,)."""
    return np.asarray(metric.score_from_stats(as_runs(stats).sum(axis=1)), dtype=np.float64).reshape(-1)


@dataclass
class ARResult:
    p_value: float
    observed_diff: float  # score(B) - score(A) from pooled statistics
    count: int  # trials counted as at least as extreme
    trials: int


def _batches(total: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, size) of consecutive blocks of at most `size` of range(total)."""
    start = 0
    while start < total:
        yield start, min(size, total - start)
        start += size


# Random draws (trials or resamples x sentences) are materialised in blocks of about this many
# entries (at least 16 rows), so memory does not grow with trials x sentences. Results equal one
# product over all rows: integer statistics sum exactly in any order, and BLAS sums the others in
# the same order for blocks of over 10^6 multiply-adds (tests compare on multi-reference TER).
BLOCK_ENTRIES = 1_000_000
ONE_CALL_COINS = 50_000_000  # R = 1: up to this many coins are those of one (trials, n) call


def _block_rows(n: int, limit: int) -> int:
    """Rows of a block of draws over n sentences (at most `limit`)."""
    return max(1, min(limit, max(16, BLOCK_ENTRIES // max(n, 1))))


def _coin_rows(rng: np.random.Generator, rows: int, n: int, block: int) -> Iterator[tuple[int, np.ndarray]]:
    """(start, bool block) of `rng.integers(2, size=(rows, n), dtype=bool)` drawn as ONE call, in
    blocks of `block` rows: numpy fills booleans from the bits of 32-bit draws, lowest bit first,
    which this repeats (tests check it against numpy)."""
    carry = np.zeros(0, dtype=bool)
    for start, size in _batches(rows, block):
        need = size * n - len(carry)
        words = rng.integers(0, 2**32, size=max(0, -(-need // 32)), dtype=np.uint32)
        bits = np.unpackbits(words.astype("<u4").view(np.uint8), bitorder="little").view(bool)
        flat = np.concatenate([carry, bits])
        carry = flat[size * n:].copy()
        yield start, flat[:size * n].reshape(size, n)


@lru_cache(maxsize=32)
def _subset_table(size_a: int, size_b: int) -> np.ndarray:
    """All ways to pick `size_a` of the size_a + size_b pooled outputs, as 0/1 rows (C x (a + b))."""
    k = size_a + size_b
    rows = [np.isin(np.arange(k), c) for c in itertools.combinations(range(k), size_a)]
    return np.array(rows, dtype=np.float64)


@lru_cache(maxsize=16)
def _perm_tables(runs: int) -> tuple[np.ndarray, np.ndarray]:
    perms = np.array(list(itertools.permutations(range(runs))), dtype=np.int64)
    return perms, perms.argsort(axis=1)


# Up to this many subsets (C(12, 6) = 924: six runs each) a split is one table lookup per sentence.
MAX_SUBSETS = 924


def _multeval_masks(rng: np.random.Generator, batch: int, n: int, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """MultEval's Shuffling: selection weights (wx, wy), each (batch, n, 2R), of the 2R pooled
    outputs per sentence (0..R-1 are A's runs, R..2R-1 B's).

    Per (sentence, run slot k) a coin c, and per sentence a random permutation pi of the runs.
    X takes (B if c else A)[pi(k)], Y takes the other system's run pi^-1(k). For R <= 2,
    pi = pi^-1 and X, Y are complementary; for R >= 3 they need not be.
    """
    coin = rng.integers(2, size=(batch, n, runs)).astype(bool)
    if runs <= 6:
        perms, invs = _perm_tables(runs)
        pick = rng.integers(len(perms), size=(batch, n))
        perm, inv = perms[pick], invs[pick]
    else:
        perm = rng.random((batch, n, runs)).argsort(axis=-1)
        inv = perm.argsort(axis=-1)
    x_src = np.where(coin, runs + perm, perm)
    y_src = np.where(coin, inv, runs + inv)
    slots = np.arange(2 * runs)
    wx = (x_src[..., None] == slots).sum(axis=-2).astype(np.float64)
    wy = (y_src[..., None] == slots).sum(axis=-2).astype(np.float64)
    return wx, wy


@overload
def approximate_randomization(metrics: Metric, stats_a: np.ndarray, stats_b: np.ndarray, trials: int = ...,
                              seed: int | None = ...,
                              stratified: bool = ..., multeval_compat: bool = ..., batch_size: int = ...,
                              progress: Progress = ...) -> ARResult: ...
@overload
def approximate_randomization(metrics: Sequence[Metric], stats_a: Sequence[np.ndarray], stats_b: Sequence[np.ndarray],
                              trials: int = ..., seed: int | None = ...,
                              stratified: bool = ..., multeval_compat: bool = ...,
                              batch_size: int = ..., progress: Progress = ...) -> list[ARResult]: ...
def approximate_randomization(metrics: Metric | Sequence[Metric], stats_a: np.ndarray | Sequence[np.ndarray],
                              stats_b: np.ndarray | Sequence[np.ndarray], trials: int = 10000,
                              seed: int | None = 12345, stratified: bool = False, multeval_compat: bool = False,
                              batch_size: int = 2000, progress: Progress = False) -> ARResult | list[ARResult]:
    """Two-sided approximate randomisation test of system B against system A.

    `stats_a` (R_A, n, k) and `stats_b` (R_B, n, k): each system's own runs (a 2-D array is one
    run). The result depends on these two systems and the seed only.

    - default: paired test (Riezler & Maxwell 2005) of the two systems' average runs: each
      sentence's statistics are averaged over the system's runs, and each trial swaps a sentence's
      A/B averages with probability 1/2 (for one run each, the coins sacrebleu --paired-ar draws
      for the same seed). Each sentence is one unit, however alike a system's runs are, so the
      test keeps its level when runs agree on most sentences (as tuning runs with different seeds
      do) and when they are independent (docs/evaluation.md, calibration).
    - `stratified=True`: Clark et al. (2011)'s stratified test, generalised to unequal run
      counts: per sentence the R_A + R_B outputs are pooled and split uniformly at random into
      pseudo-systems of R_A and R_B outputs, each scored as its average run. Exact when a
      sentence's outputs are exchangeable (independent runs); when a system's runs agree on most
      sentences the split under-states the variance and rejects too often.
    - `multeval_compat=True`: MultEval's rules: c counts strictly greater differences, runs are
      shuffled with MultEval's non-complementary pseudo-systems, and a one-run system stands for R
      identical runs (MultEval given the same file R times); different run counts above one are
      refused. Not calibrated either (docs/evaluation.md).

    p = (c + 1)/(N + 1), c = trials whose |difference| >= the observed one (a system against
    itself gets p = 1); the difference is score(B's average run) - score(A's average run).
    `metrics` may be one metric (stats_a/stats_b arrays) or a list of metrics (lists of arrays);
    all metrics share the same random draws, as MultEval and sacrebleu do. The trials run in
    blocks (memory does not grow with them); `progress` (rerank.progress) advances per block, a
    terminal bar showing itself after a second.
    """
    if stratified and multeval_compat:
        raise ValueError("choose the stratified split or MultEval's rules, not both")
    single = isinstance(metrics, Metric)
    if isinstance(metrics, Metric):
        metrics, stats_a, stats_b = [metrics], [np.asarray(stats_a)], [np.asarray(stats_b)]
    a_list, b_list = _paired_runs(stats_a, stats_b)
    if not (stratified or multeval_compat):  # one unit per sentence: the average of each system's runs
        a_list = [a.mean(axis=0, keepdims=True) for a in a_list]
        b_list = [b.mean(axis=0, keepdims=True) for b in b_list]
    ra, rb = len(a_list[0]), len(b_list[0])
    if multeval_compat and ra != rb and min(ra, rb) > 1:
        raise ValueError(f"MultEval's test needs both systems with the same number of runs (or one with one "
                         f"run), got {ra} and {rb}")
    offsets = np.cumsum([0] + [a.shape[2] for a in a_list])
    # Each sentence's outputs (A's runs, then B's) x all metrics' statistics side by side.
    pool = np.concatenate([np.concatenate([a, b], axis=0) for a, b in zip(a_list, b_list)], axis=2)
    if multeval_compat:  # both sides stand for max(R_A, R_B) runs: no scaling
        copies_a, copies_b = max(ra, rb) // ra, max(ra, rb) // rb
        scale_x = scale_y = 1.0
    else:
        copies_a = copies_b = 1
        scale_x, scale_y = (1.0, 1.0) if ra == rb else (1.0 / ra, 1.0 / rb)
    observed = [float(m.score_from_stats(b.sum(axis=(0, 1)) * copies_b * scale_y)
                      - m.score_from_stats(a.sum(axis=(0, 1)) * copies_a * scale_x))
                for m, a, b in zip(metrics, a_list, b_list)]
    rng = np.random.default_rng(seed)
    if ra == rb == 1:
        blocks = _swap_blocks(pool, trials, batch_size, rng)
    elif multeval_compat:
        blocks = _multeval_blocks(pool, ra, rb, trials, batch_size, rng)
    else:
        blocks = _stratified_blocks(pool, ra, rb, trials, batch_size, rng)
    counts = np.zeros(len(metrics), dtype=np.int64)
    with progress_bar(progress, "randomisation", trials, unit="trial", delay=1.0) as bar:
        for sums_x, sums_y in blocks:
            for i, metric in enumerate(metrics):
                lo, hi = offsets[i], offsets[i + 1]
                d = np.abs(np.asarray(metric.score_from_stats(sums_y[:, lo:hi] * scale_y)) -
                           np.asarray(metric.score_from_stats(sums_x[:, lo:hi] * scale_x)))
                obs = abs(observed[i])
                counts[i] += int(np.count_nonzero(d > obs + _TOL if multeval_compat else d >= obs - _TOL))
            bar.update(len(sums_x))
    results = [ARResult(p_value=(int(c) + 1) / (trials + 1), observed_diff=o, count=int(c), trials=trials)
               for c, o in zip(counts, observed)]
    return results[0] if single else results


def _paired_runs(stats_a: Iterable[np.ndarray], stats_b: Iterable[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each metric's statistics of both systems as (R, n, k): the same sentences, and each system
    with the same run count for every metric."""
    a_list = [as_runs(s) for s in stats_a]
    b_list = [as_runs(s) for s in stats_b]
    ra, rb = len(a_list[0]), len(b_list[0])
    n = a_list[0].shape[1]
    for a, b in zip(a_list, b_list):
        if a.shape[1:] != b.shape[1:] or a.shape[1] != n or (len(a), len(b)) != (ra, rb):
            raise ValueError(f"systems need the same sentences and statistics: {a.shape} vs {b.shape}")
    return a_list, b_list


def _swap_blocks(pool: np.ndarray, trials: int, batch_size: int,
                 rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """R_A = R_B = 1: (sums_x, sums_y) blocks of trials that swap each sentence's A/B statistics
    with p = 0.5. The coins are those of one (trials, n) call (sacrebleu's swaps for the same seed)
    up to ONE_CALL_COINS, else of one call per batch, generated in blocks (`_coin_rows`)."""
    n = pool.shape[1]
    diff = pool[1] - pool[0]  # (n, K)
    total = pool.sum(axis=(0, 1))
    base = pool[0].sum(axis=0)
    calls = [trials] if trials * n <= ONE_CALL_COINS else [size for _, size in _batches(trials, batch_size)]
    for call in calls:
        for _, swap in _coin_rows(rng, call, n, _block_rows(n, batch_size)):
            sums_x = base + swap.astype(np.float64) @ diff
            yield sums_x, total - sums_x


def _stratified_blocks(pool: np.ndarray, size_a: int, size_b: int, trials: int, batch_size: int,
                       rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(sums_x, sums_y) blocks of trials that split each sentence's size_a + size_b outputs
    uniformly into size_a for X and the rest for Y. Up to MAX_SUBSETS possible splits, each
    sentence contributes one of its precomputed subset sums (a sparse row per trial); beyond,
    random ranks pick the split (dense masks)."""
    from scipy.sparse import csr_matrix

    k, n = pool.shape[0], pool.shape[1]
    total = pool.sum(axis=(0, 1))
    if math.comb(k, size_a) <= MAX_SUBSETS:
        table = _subset_table(size_a, size_b)
        n_sub = len(table)
        sub = np.einsum("sj,jnk->nsk", table, pool).reshape(n * n_sub, -1)
        offsets_n = np.arange(n) * n_sub
        for _, size in _batches(trials, _block_rows(n, batch_size)):  # integer draws: blocks keep the stream
            pick = rng.integers(n_sub, size=(size, n))
            rows = csr_matrix((np.ones(size * n), (pick + offsets_n).ravel(), np.arange(0, size * n + 1, n)),
                              shape=(size, n * n_sub))
            sums_x = np.asarray(rows @ sub)
            yield sums_x, total - sums_x
        return
    flat = pool.transpose(1, 0, 2).reshape(n * k, -1)  # (n * outputs, K), sentence-major
    for _, size in _batches(trials, max(1, batch_size // k)):
        ranks = rng.random((size, n, k)).argsort(axis=-1).argsort(axis=-1)
        sums_x = (ranks < size_a).astype(np.float64).reshape(size, -1) @ flat
        yield sums_x, total - sums_x


def _multeval_blocks(pool: np.ndarray, ra: int, rb: int, trials: int, batch_size: int,
                     rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """MultEval's shuffle (`_multeval_masks`) over R = max(R_A, R_B) runs; a one-run system fills
    all R of its run slots."""
    runs = max(ra, rb)
    n = pool.shape[1]
    slots = None
    if ra != rb:  # (2R, ra + rb): which stored output fills each of the 2R run slots
        slots = np.zeros((2 * runs, ra + rb))
        k = np.arange(runs)
        slots[k, k if ra == runs else 0] = 1.0
        slots[runs + k, ra + (k if rb == runs else 0)] = 1.0
    flat = pool.transpose(1, 0, 2).reshape(n * len(pool), -1)  # (n * outputs, K), sentence-major
    for _, size in _batches(trials, max(1, batch_size // (2 * runs))):
        wx, wy = _multeval_masks(rng, size, n, runs)
        if slots is not None:
            wx, wy = wx @ slots, wy @ slots
        yield wx.reshape(size, -1) @ flat, wy.reshape(size, -1) @ flat


def _resample_counts(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """(rows, n) float counts of each sentence in `rows` resamples drawn as sacrebleu --paired-bs does."""
    idx = rng.choice(n, size=(rows, n), replace=True)
    idx += (np.arange(rows) * n)[:, None]
    counts = np.bincount(idx.ravel(), minlength=rows * n)
    del idx
    return counts.reshape(rows, n).astype(np.float64)


def bootstrap_weights(rng: np.random.Generator, samples: int, n: int) -> np.ndarray:
    """(samples, n) counts of each sentence in each bootstrap resample (with replacement), drawn as
    sacrebleu --paired-bs draws them: the same seed gives the same resamples."""
    return _resample_counts(rng, samples, n)


class Resamples:
    """`bootstrap_weights(np.random.default_rng(seed), samples, n)` without holding it: `self @ stats`
    (n, k) regenerates the counts from the seed in blocks of resamples (the draws are sequential, so
    blocks give the same resamples). `prefetch` computes many products in one pass and keeps them;
    an array must not change after its product is taken. `progress` (rerank.progress) advances
    per block of resamples, a terminal bar showing itself after a second."""

    def __init__(self, seed: int | None, samples: int, n: int, progress: Progress = False):
        self.seed, self.shape, self.progress = seed, (samples, n), progress
        self._products: dict = {}

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(start, counts) blocks of rows of the dense (samples, n) counts, in order."""
        samples, n = self.shape
        rng = np.random.default_rng(self.seed)
        for start, size in _batches(samples, _block_rows(n, max(samples, 1))):
            yield start, _resample_counts(rng, size, n)

    @staticmethod
    def _key(a: np.ndarray) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        return a.__array_interface__["data"][0], a.shape, a.strides

    def prefetch(self, arrays: Iterable[np.ndarray]) -> None:
        """Compute `self @ a` for every 2-D float64 array `a` in one pass over the resamples."""
        todo = {self._key(a): a for a in arrays if self._key(a) not in self._products}
        if not todo:
            return
        out = {key: np.empty((self.shape[0], a.shape[1])) for key, a in todo.items()}
        shown = self.progress if self.shape[0] else False   # no resamples: no bar
        with progress_bar(shown, "bootstrap", self.shape[0], unit="resample", delay=1.0) as bar:
            for start, counts in self.blocks():
                for key, a in todo.items():
                    out[key][start:start + len(counts)] = counts @ a
                bar.update(len(counts))
        self._products.update({key: (todo[key], out[key]) for key in todo})  # (array kept alive, product)

    def __matmul__(self, stats: np.ndarray) -> np.ndarray:
        stats = np.asarray(stats, dtype=np.float64)
        self.prefetch([stats])
        return self._products[self._key(stats)][1]


def bootstrap_run_scores(metric: Metric, stats: np.ndarray, weights: np.ndarray | Resamples) -> np.ndarray:
    """Scores (R, samples) of every run on every resample of `weights` ((samples, n) or Resamples)."""
    return np.stack([np.asarray(metric.score_from_stats(weights @ r)) for r in as_runs(stats)])


@dataclass
class RunStats:
    mean: float  # mean over runs of the corpus score
    s_opt: float | None  # std dev of the R corpus scores (ddof=1; None for R = 1)
    s_sel: float | None  # bootstrap std dev of the test-set score, mean over runs (None without resamples)
    run_scores: list


def run_statistics(metric: Metric, stats: np.ndarray, weights: np.ndarray | Resamples | None = None, samples: int = 1000,
                   seed: int | None = 12345) -> RunStats:
    """Mean, s_opt and s_sel as MultEval reports them (Clark et al. 2011); `weights`: (samples, n)
    counts or Resamples (default: `samples` resamples from `seed`)."""
    scores = run_scores(metric, stats)
    runs = as_runs(stats)
    if weights is None:
        weights = Resamples(seed, samples, runs.shape[1])
    s_opt = float(scores.std(ddof=1)) if len(scores) > 1 else None
    s_sel = None
    if weights.shape[0] >= 2:  # else no resampling requested
        s_sel = float(np.mean(bootstrap_run_scores(metric, runs, weights).std(axis=1, ddof=1)))
    return RunStats(mean=float(scores.mean()), s_opt=s_opt, s_sel=s_sel, run_scores=scores.tolist())


def estimate_ci(scores: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of the 95% interval of bootstrap scores (sacrebleu's rule)."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    lower = len(s) // 40
    upper = len(s) - lower - 1
    return float(s.mean()), float(0.5 * (s[upper] - s[lower]))


@dataclass
class BootstrapResult:
    p_value: float
    mean: float  # bootstrap mean of the system score (mean over runs)
    ci: float  # 95% half-width of the system score
    delta_mean: float  # bootstrap mean of system - baseline
    delta_low: float  # 2.5% quantile of system - baseline
    delta_high: float  # 97.5% quantile


def paired_bootstrap(metric: Metric, stats_base: np.ndarray, stats_sys: np.ndarray, weights: np.ndarray | Resamples,
                     sacrebleu_compat: bool = False) -> BootstrapResult:
    """Paired bootstrap resampling (Koehn 2004) over run-averaged scores.

    Both systems are scored on the same resamples (`weights`: `bootstrap_weights` or `Resamples`),
    each as the mean over its own runs. The p-value is two-sided and inverts the percentile
    interval of the difference: p = 2 min(#(delta* <= 0) + 1, #(delta* >= 0) + 1)/(B + 1), capped
    at 1, so p < alpha exactly when 0 lies outside the (1 - alpha) interval of the difference.
    `sacrebleu_compat=True`: sacrebleu --paired-bs's rule instead (the count of centred absolute
    differences |delta*| - mean|delta*| strictly above the observed |difference|), which rejects
    far more than alpha of equal systems (docs/evaluation.md).
    """
    base, sys_ = as_runs(stats_base), as_runs(stats_sys)
    b = bootstrap_run_scores(metric, base, weights).mean(axis=0)
    s = bootstrap_run_scores(metric, sys_, weights).mean(axis=0)
    delta = s - b
    if sacrebleu_compat:
        observed = abs(run_scores(metric, sys_).mean() - run_scores(metric, base).mean())
        diffs = np.abs(delta)
        p = (int(np.count_nonzero(diffs - diffs.mean() > observed)) + 1) / (len(diffs) + 1)
    else:
        tail = min(int(np.count_nonzero(delta <= 0)), int(np.count_nonzero(delta >= 0)))
        p = min(1.0, 2 * (tail + 1) / (len(delta) + 1))
    mean, ci = estimate_ci(s)
    lo, hi = np.percentile(delta, [2.5, 97.5])
    return BootstrapResult(p_value=p, mean=mean, ci=ci, delta_mean=float(delta.mean()),
                           delta_low=float(lo), delta_high=float(hi))


def holm_bonferroni(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (monotone, capped at 1), in the input order."""
    p = np.asarray(p_values, dtype=np.float64)
    m, running = len(p), 0.0
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adjusted[idx] = running
    return adjusted.tolist()
