"""Per-hypothesis BLEU sufficient statistics, computed once with sacrebleu's own code
(through rerank.sacre_stats, the only user of its private methods).

Layout (sacrebleu's): ``[sys_len, ref_len, correct_1..4, total_1..4]`` as float64, one row
per hypothesis. Summing rows and calling `corpus_bleu` gives exactly sacrebleu's corpus
BLEU for the chosen hypotheses; `corpus_bleu_batch` scores many pseudo-corpora at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

from rerank.errors import InputError
from rerank.progress import track
from rerank.nbest import segment_argmax
from rerank.sacre_stats import bleu_sentence_stats

N_STATS = 10
SYS_LEN, REF_LEN = 0, 1
CORRECT = slice(2, 6)
TOTAL = slice(6, 10)


def make_bleu(tokenize: str = "13a", lowercase: bool = False) -> BLEU:
    if tokenize not in BLEU.TOKENIZERS:
        raise InputError(f"unknown BLEU tokenizer {tokenize!r} (known: {', '.join(BLEU.TOKENIZERS)})")
    return BLEU(tokenize=tokenize, lowercase=lowercase)


def bleu_signature(tokenize: str = "13a", lowercase: bool = False, n_refs: int = 1) -> str:
    """sacrebleu's short BLEU signature for these settings (e.g. `nrefs:1|case:mixed|...`)."""
    bleu = make_bleu(tokenize, lowercase)
    bleu.num_refs = n_refs
    return str(bleu.get_signature().format(short=False))


def hypothesis_stats(
    hyps: Sequence[str],
    offsets: np.ndarray,
    refs: Sequence[Sequence[str]],
    tokenize: str = "13a",
    lowercase: bool = False,
    progress: bool = False,
) -> np.ndarray:
    """BLEU statistics of every hypothesis against its sentence's references.

    hyps: all hypotheses (n_hyps); offsets: CSR pointers (n_sentences + 1);
    refs: refs[k][i] is reference k of sentence i. Returns float64 (n_hyps, 10).
    """
    n_sent = len(offsets) - 1
    for k, stream in enumerate(refs):
        if len(stream) != n_sent:
            raise InputError(f"reference set {k + 1} has {len(stream)} lines for {n_sent} sentences")
    bleu = make_bleu(tokenize, lowercase)
    out = np.zeros((len(hyps), N_STATS))
    bounds = np.asarray(offsets).tolist()
    for i in track(range(n_sent), progress, "BLEU statistics", unit="sent"):
        lo, hi = bounds[i], bounds[i + 1]
        if hi > lo:
            out[lo:hi] = bleu_sentence_stats(bleu, hyps[lo:hi], [stream[i] for stream in refs])
    return out


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


def oracle_rows(stats: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Row of the sentence-BLEU+1 best hypothesis of every list (ties go to the earlier one)."""
    return segment_argmax(sentence_bleu_plus1(stats), offsets)


def oracle(hyps: Sequence[str], offsets: np.ndarray, refs: Sequence[Sequence[str]],
           tokenize: str = "13a") -> tuple[float, np.ndarray]:
    """(corpus BLEU of the oracle picks, their rows): each list's sentence-BLEU+1 best hypothesis."""
    stats = hypothesis_stats(hyps, offsets, refs, tokenize)
    picks = oracle_rows(stats, offsets)
    return corpus_bleu(stats[picks].sum(0)), picks
