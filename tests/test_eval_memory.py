"""`rerank eval` memory: blocked random draws and chunked statistics give the unblocked results,
and neither trials x sentences arrays nor sacrebleu's per-line objects outlive their block."""

import gc
import os
import tracemalloc

import numpy as np
import pytest

import rerank.metrics.sacre as sacre
import rerank.significance as sig
from rerank.metrics import make_metric
from rerank.metrics.sacre_stats import clear_tokenizer_cache, corpus_segment_stats
from rerank.significance import Resamples, approximate_randomization, bootstrap_weights, paired_bootstrap, run_statistics

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")


def lines(name, copies=1):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        base = fh.read().splitlines()
    return [line + (f" {c}" if c else "") for c in range(copies) for line in base]


@pytest.mark.parametrize("rows,n,block", [(37, 3, 5), (10, 64, 3), (7, 1, 2), (50, 33, 50), (4, 100, 1)])
def test_coin_rows_equal_one_numpy_call(rows, n, block):
    want = np.random.default_rng(11).integers(2, size=(rows, n), dtype=bool)
    rng = np.random.default_rng(11)
    got = np.concatenate([b for _, b in sig._coin_rows(rng, rows, n, block)])
    np.testing.assert_array_equal(got, want)
    after = np.random.default_rng(11)
    after.integers(2, size=(rows, n), dtype=bool)
    assert rng.integers(1 << 30, size=4).tolist() == after.integers(1 << 30, size=4).tolist()


def _stats(n, fractional, seed=0):
    """TER-like statistics: integer edits, reference lengths in thirds (three references) if fractional."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 60, size=n) / (3.0 if fractional else 1.0)
    return np.stack([rng.integers(0, 30, size=n).astype(float), lengths], axis=1)


@pytest.mark.parametrize("fractional", [False, True])
def test_resamples_equal_dense_bootstrap_weights(fractional):
    n, samples = 20000, 300  # blocks of 50 resamples: 4 blocks of 2 * 10^6 multiply-adds
    stats = np.stack([_stats(n, fractional, 1), _stats(n, fractional, 2)])
    dense = bootstrap_weights(np.random.default_rng(7), samples, n)
    lazy = Resamples(7, samples, n)
    assert sig._block_rows(n, samples) == 50
    lazy.prefetch(list(stats))
    for run in stats:
        np.testing.assert_array_equal(lazy @ run, dense @ run)
    ter = make_metric("ter")
    assert run_statistics(ter, stats, lazy) == run_statistics(ter, stats, dense)
    assert paired_bootstrap(ter, stats[0], stats[1], lazy) == paired_bootstrap(ter, stats[0], stats[1], dense)
    assert Resamples(7, 0, n).shape == (0, n)


@pytest.mark.parametrize("runs,one_call", [(1, True), (1, False), (3, True)])
def test_blocked_randomisation_equals_unblocked(monkeypatch, runs, one_call):
    n = 5000
    a = np.stack([_stats(n, True, 10 + r) for r in range(runs)])
    b = np.stack([_stats(n, True, 20 + r) * [0.98, 1.0] for r in range(runs)])
    ter = make_metric("ter")
    if not one_call:
        monkeypatch.setattr(sig, "ONE_CALL_COINS", 1000)  # coins drawn per batch of 2000 trials
    blocked = approximate_randomization(ter, a, b, trials=5000, seed=3, stratified=runs > 1)
    assert sig._block_rows(n, 2000) == 200
    monkeypatch.setattr(sig, "BLOCK_ENTRIES", 10**12)  # one block per batch: the unblocked computation
    whole = approximate_randomization(ter, a, b, trials=5000, seed=3, stratified=runs > 1)
    assert blocked == whole and 0 < blocked.count < 5000


def test_randomisation_and_resamples_memory_does_not_grow_with_trials_x_sentences():
    n = 20000
    a, b = _stats(n, False, 1), _stats(n, False, 2)
    ter = make_metric("ter")
    tracemalloc.start()
    try:
        approximate_randomization(ter, a, b, trials=4000, seed=1)  # 8e7 coins: 640 MB as float64
        Resamples(1, 1000, n) @ a  # the dense counts: 160 MB
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 30e6


@pytest.mark.parametrize("name", ["bleu", "ter", "chrf"])
def test_chunked_statistics_equal_one_call_and_free_tokeniser_caches(monkeypatch, name):
    refs = [lines("ref.en", 3), lines("cap3.en", 3)]
    hyps = lines("cap1.en", 3)
    metric = make_metric(name, tokenize="13a")
    inner = metric.sacre   # the sacrebleu object the metric scores with
    whole = np.asarray(corpus_segment_stats(inner, hyps, refs), dtype=np.float64)
    clear_tokenizer_cache(inner)  # below: what the metric's own call leaves (TER's tokenises around the cache)
    monkeypatch.setattr(sacre, "CHUNK", 7)
    np.testing.assert_array_equal(metric.sentence_stats(hyps, refs), whole)
    tokenizer = getattr(inner, "tokenizer", None)
    if tokenizer is not None:
        assert type(tokenizer).__call__.cache_info().currsize == 0


def test_no_python_objects_per_sentence_outlive_bleu_statistics():
    refs, hyps = [lines("ref.en", 80)], lines("cap1.en", 80)  # 3,200 distinct lines
    metric = make_metric("bleu", tokenize="13a")
    metric.sentence_stats(hyps[1600:], [refs[0][1600:]])  # warm-up: Python's tuple free lists fill
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        stats = metric.sentence_stats(hyps[:1600], [refs[0][:1600]])
        gc.collect()  # the last chunk's objects may sit in a reference cycle until the next collection
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert stats.shape == (1600, 10) and stats.dtype == np.float64
    assert kept < stats.nbytes + 65536  # the array, not 1,600 n-gram Counters or cached tokenisations
