"""BLEU in one place: per-hypothesis sufficient statistics, corpus BLEU and sentence BLEU+1.

`hypothesis_stats` is the toolkit's one implementation of BLEU statistics (the eval metric
rerank.metrics.sacre.BLEUMetric, and through it the tuners, the oracle and the report): sacrebleu's
tokenisers, closest reference length and clipping, computed as arrays over blocks of whole lists
(rerank.metrics.ngrams); tests check it against sacrebleu's own per-segment statistics. MBR's
utilities (rerank.consensus) count their pairs' and aggregate references' n-grams with the same
NgramCounter and `clipped_counts`, lay them out with `stats_array` and score them with
`sentence_bleu_plus1`.

Layout (sacrebleu's): ``[sys_len, ref_len, correct_1..4, total_1..4]`` as float64, one row
per hypothesis. Summing rows and calling `corpus_bleu` gives exactly sacrebleu's corpus
BLEU for the chosen hypotheses; `corpus_bleu_batch` scores many pseudo-corpora at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

from rerank.errors import InputError
from rerank.progress import Progress, track
from rerank.metrics.ngrams import NgramCounter, clipped_counts, sentence_blocks, token_sequences
from rerank.metrics.sacre_stats import clear_tokenizer_cache

N_STATS = 10
SYS_LEN, REF_LEN = 0, 1
CORRECT = slice(2, 6)
TOTAL = slice(6, 10)


def make_bleu(tokenize: str = "13a", lowercase: bool = False) -> BLEU:
    if tokenize not in BLEU.TOKENIZERS:
        raise InputError(f"unknown BLEU tokenizer {tokenize!r} (known: {', '.join(BLEU.TOKENIZERS)})")
    return BLEU(tokenize=tokenize, lowercase=lowercase)


def hypothesis_stats(
    hyps: Sequence[str],
    offsets: np.ndarray,
    refs: Sequence[Sequence[str]],
    tokenize: str = "13a",
    lowercase: bool = False,
    progress: Progress = False,
) -> np.ndarray:
    """BLEU statistics of every hypothesis against its sentence's references.

    hyps: all hypotheses (n_hyps); offsets: CSR pointers (n_sentences + 1);
    refs: refs[k][i] is reference k of sentence i. Returns float64 (n_hyps, 10).

    sacrebleu's statistics (its tokeniser, its closest reference length, its clipping by the
    largest count in any reference), computed for blocks of whole lists at once as arrays
    (`block_stats`) rather than one Counter per hypothesis (`tune` on 1M tiled lines: 97 s, was
    194; docs/formats.md); tests/test_metrics_sacre.py checks them against sacrebleu's own
    per-segment statistics.
    """
    n_sent = len(offsets) - 1
    for k, stream in enumerate(refs):
        if len(stream) != n_sent:
            raise InputError(f"reference set {k + 1} has {len(stream)} lines for {n_sent} sentences")
    make_bleu(tokenize, lowercase)  # an unknown tokenizer is refused before any work
    out = np.zeros((len(hyps), N_STATS))
    bounds = np.asarray(offsets, dtype=np.int64)
    for a, b in track(sentence_blocks(np.diff(bounds), BLOCK_HYPS), progress, "BLEU statistics", unit="block"):
        lo, hi = int(bounds[a]), int(bounds[b])
        out[lo:hi] = block_stats(hyps[lo:hi], bounds[a:b + 1] - lo, [stream[a:b] for stream in refs], tokenize,
                                 lowercase)
    clear_tokenizer_cache(make_bleu(tokenize, lowercase))  # sacrebleu's tokenisers cache up to 65,536 lines for good
    return out


BLOCK_HYPS = 10_000  # hypotheses per block of block_stats: 100,000 held 190 MB more at the peak, no faster


def block_stats(hyps: Sequence[str], offsets: np.ndarray, refs: Sequence[Sequence[str]], tokenize: str,
                lowercase: bool) -> np.ndarray:
    """`hypothesis_stats` of one block of lists. The texts are laid out list by list, its K
    references first, then its hypotheses; every distinct n-gram of a list gets a column
    (rerank.metrics.ngrams.NgramCounter), its reference count is the largest of the references', and a
    hypothesis matches min(its count, that) of it, as sacrebleu clips."""
    n_sent, n_refs = len(offsets) - 1, len(refs)
    sizes = np.diff(offsets)
    per_list = sizes + n_refs
    group = np.repeat(np.arange(n_sent, dtype=np.int64), per_list)
    first = np.concatenate([[0], np.cumsum(per_list)[:-1]]).astype(np.int64)
    local = np.arange(len(group), dtype=np.int64) - first[group]
    is_ref = local < n_refs
    layout = np.empty(len(group), dtype=object)
    layout[is_ref] = [stream[i] for i in range(n_sent) for stream in refs]
    layout[~is_ref] = list(hyps)
    texts = layout.tolist()
    if lowercase:
        texts = [t.lower() for t in texts]
    ids, text_bounds = token_sequences(texts, tokenize)
    lengths = np.diff(text_bounds)
    hyp_rows = ~is_ref
    hyp_lengths = lengths[hyp_rows]
    closest = np.zeros(len(hyp_lengths))
    if n_refs:
        ref_lengths = lengths[is_ref].reshape(n_sent, n_refs)[group[hyp_rows]]
        # the closest reference length, the shorter one on a tie (sacrebleu's _get_closest_ref_len)
        key = np.abs(ref_lengths - hyp_lengths[:, None]) * (int(lengths.max(initial=0)) + 1) + ref_lengths
        closest = ref_lengths[np.arange(len(key)), key.argmin(axis=1)]
    counter = NgramCounter(ids, text_bounds, group)
    matches, totals = [], []
    for n in range(1, 5):
        rows, cols, counts = counter.counts(n)
        ref_entry = is_ref[rows]
        reference = np.zeros(int(cols.max(initial=-1)) + 1)
        np.maximum.at(reference, cols[ref_entry], counts[ref_entry])
        correct, total = clipped_counts(rows, cols, counts, reference, len(texts))
        matches.append(correct[hyp_rows])
        totals.append(total[hyp_rows])
    return stats_array(hyp_lengths, closest, matches, totals)


def stats_array(sys_len: np.ndarray, ref_len: np.ndarray, matches: Sequence[np.ndarray],
                totals: Sequence[np.ndarray]) -> np.ndarray:
    """BLEU statistics in sacrebleu's layout, float64 (n, 10), from the hypotheses' and references'
    lengths and, for the orders 1..4 in turn, the clipped n-gram matches and the n-gram totals."""
    stats = np.empty((len(sys_len), N_STATS))
    stats[:, SYS_LEN], stats[:, REF_LEN] = sys_len, ref_len
    stats[:, CORRECT] = np.column_stack(matches) if len(matches) else 0.0
    stats[:, TOTAL] = np.column_stack(totals) if len(totals) else 0.0
    return stats


def corpus_bleu(stats: np.ndarray) -> float:
    """sacrebleu corpus BLEU (exp smoothing) from summed statistics (10,)."""
    stats = np.asarray(stats)
    return BLEU.compute_bleu(
        correct=[int(x) for x in stats[CORRECT]], total=[int(x) for x in stats[TOTAL]],
        sys_len=int(stats[SYS_LEN]), ref_len=int(stats[REF_LEN]), smooth_method="exp",
    ).score


def corpus_bleu_batch(stats: np.ndarray) -> np.ndarray:
    """Corpus BLEU of many summed statistic vectors at once: (..., 10) -> (...).

    Matches sacrebleu's 'exp' smoothing: an n-gram order with zero matches counts as
    1 / (2^k * total) for the k-th such order.
    """
    stats = np.asarray(stats, dtype=np.float64)
    correct, total = stats[..., CORRECT], stats[..., TOTAL]
    sys_len, ref_len = stats[..., SYS_LEN], stats[..., REF_LEN]
    zero = correct == 0
    halvings = np.cumsum(zero, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(zero, 1.0 / (2.0 ** halvings * total), correct / total)
        log_bp = np.where(sys_len < ref_len, 1 - ref_len / sys_len, 0.0)
        score = 100.0 * np.exp(log_bp + np.log(precision).mean(axis=-1))
    # sacrebleu returns 0 when nothing matches, when an order has no n-grams at all, or sys_len is 0
    valid = np.any(correct > 0, axis=-1) & np.all(total > 0, axis=-1) & (sys_len > 0)
    return np.where(valid, score, 0.0)


def sentence_bleu_plus1(stats: np.ndarray) -> np.ndarray:
    """BLEU+1 (Lin & Och 2004) per row: add 1 to matches and totals of orders 2-4; (n, 10) -> (n,)."""
    stats = np.asarray(stats, dtype=np.float64)
    correct = stats[..., CORRECT].copy()
    total = stats[..., TOTAL].copy()
    correct[..., 1:] += 1
    total[..., 1:] += 1
    sys_len, ref_len = stats[..., SYS_LEN], stats[..., REF_LEN]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_prec = np.log(correct / total).mean(axis=-1)
        log_bp = np.where(sys_len < ref_len, 1 - ref_len / np.maximum(sys_len, 1e-9), 0.0)
        score = np.exp(log_prec + log_bp)
    return np.where((sys_len > 0) & (correct[..., 0] > 0), score, 0.0)


SMOOTHING = ("add-k", "exp", "floor", "none")   # sacrebleu's names
SMOOTH_DEFAULTS = {"add-k": 1.0, "floor": 0.1, "exp": None, "none": None}


def sentence_bleu(stats: np.ndarray, smooth: str = "add-k", value: float | None = None) -> np.ndarray:
    """Sentence BLEU per row as a fraction, as sacrebleu's `BLEU(smooth_method=smooth,
    smooth_value=value, effective_order=True).sentence_score` computes it (its compute_bleu: the
    early 0 without matches, add-k on orders 2-4, the orders up to the first empty one, exp's
    halving per order without matches, floor), vectorised over rows; (..., 10) -> (...). Add-k
    with k = 1 is BLEU+1 (`sentence_bleu_plus1`, the same numbers); sacrebleu's own default is exp."""
    if smooth not in SMOOTHING:
        raise InputError(f"unknown BLEU smoothing {smooth!r} (known: {', '.join(SMOOTHING)})")
    k = SMOOTH_DEFAULTS[smooth] if value is None else float(value)
    stats = np.asarray(stats, dtype=np.float64)
    correct, total = stats[..., CORRECT].copy(), stats[..., TOTAL].copy()
    matched = (correct > 0).any(axis=-1)
    if smooth == "add-k":
        correct[..., 1:] += k
        total[..., 1:] += k
    valid = np.cumprod(total > 0, axis=-1).astype(bool)          # orders before the first empty one
    order = np.maximum(valid.sum(axis=-1), 1)                      # the effective order
    zero = (correct == 0) & valid
    with np.errstate(divide="ignore", invalid="ignore"):
        safe = np.where(total > 0, total, 1.0)
        precision = np.where(correct > 0, correct / safe, 0.0)
        if smooth == "exp":
            precision = np.where(zero, 1.0 / (2.0 ** np.cumsum(zero, axis=-1) * safe), precision)
        elif smooth == "floor":
            precision = np.where(zero, k / safe, precision)
        logs = np.where(precision > 0, np.log(np.where(precision > 0, precision, 1.0)), -np.inf)
        used = np.arange(4) < order[..., None]
        log_mean = np.where(used, logs, 0.0).sum(axis=-1) / order
        sys_len, ref_len = stats[..., SYS_LEN], stats[..., REF_LEN]
        log_bp = np.where(sys_len < ref_len, 1 - ref_len / np.where(sys_len > 0, sys_len, 1.0), 0.0)
        score = np.exp(log_mean + log_bp)
    return np.where(matched & (sys_len > 0), score, 0.0)
