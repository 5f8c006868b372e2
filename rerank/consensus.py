"""Minimum-Bayes-risk (consensus) features: the expected utility of each hypothesis against
the hypotheses of its own list as pseudo-references, weighted by the model's posterior.

    mbr(h_i) = 100 sum_j p_j U(h_i, h_j),   p = softmax(score / T) within the list

in percent, like the metrics' scores: a feature on the scale of the others lets k-best MIRA
(whose steps are capped at C) reach a useful weight (on the shipped optimised 20-best lists,
the same feature in [0, 1] gained nothing over the NMT features; in percent, +0.34 BLEU).

The sum includes j = i, as standard MBR decoding does (mbrs, Kumar & Byrne 2004): as T -> 0
the feature ranks the model's 1-best first (MAP), as T grows it becomes pure consensus.

U is sentence BLEU+1 (Lin & Och 2004; the toolkit's sentence-level BLEU, rerank.metrics.bleu),
sentence chrF (sacrebleu's formula, rerank.metrics), or minus sentence TER (sacrebleu's numbers,
rerank.metrics.ter): each pair's metric value oriented by the metric registry (rerank.metrics.registry.objective), so a
lower-is-better metric counts as a loss and the feature is always higher-is-better. For
BLEU and chrF every pair of a list is scored at once: n-grams get integer ids per sentence,
clipped matches sum_g min(c_i(g), c_j(g)) come from the pairs of texts that share each n-gram
(`pair_matches`: linear in the texts, however often a word repeats), and the formulas run over all
pairs as numpy arrays; the n-grams are counted, clipped and laid out as BLEU statistics by the
toolkit's BLEU code (rerank.metrics.ngrams.NgramCounter, rerank.metrics.bleu). TER needs an edit
distance with shifts per pair: the toolkit's TER (rerank.metrics.ter, sacrebleu's numbers), which
runs every distinct pair of a block in one call of its compiled kernel.

Exact MBR runs in blocks of whole sentences of at most `block_pairs` pairs (a list larger than
that is a block of its own), so its memory is bounded by the largest list, not by the file; the
result is the same as one computation over the whole file (every pair's utility and every row's
sum are the same numbers in the same order; tests check it).

`method="aggregate"` is linear-time MBR with reference aggregation (DeNero et al. 2009, "Fast
consensus decoding over translation forests"; Vamvas & Sennrich 2024, "Linear-time minimum Bayes
risk decoding with reference aggregation"), for BLEU and chrF: per list, the posterior-weighted
expected n-gram counts E[c](g) = sum_j p_j c_j(g) (and the expected reference length, or the
expected n-gram totals for chrF) form one aggregate reference, and each hypothesis is scored once
against it with the same formula on fractional statistics, clipped matches min(c_i(g), E[c](g)):

    mbr_agg(h_i) = 100 U(h_i, E_p[h])

It equals exact MBR when all posterior mass is on one hypothesis (then E[c] is that hypothesis's
counts; this includes one-hypothesis lists), and otherwise differs from it because U is not linear
in the reference's counts (min is concave, so the aggregate's matches are at least the expected
matches). Time and memory are linear in the list size.

Each utility is a class with `exact` and `aggregate` methods (`TextUtility` says the interface):
BLEUUtility, CHRFUtility and TERUtility score the texts alone, rerank.metrics.comet.MBRUtility and
the plug-ins sim and mlmme (VectorUtility) score with a user's model (`needs_model`). MBR_UTILITIES
(a rerank.plugins.Registry) holds them by name, the built-in ones and those of the entry-point
group rerank.mbr_utilities, so that `--mbr-utility NAME` takes a plug-in's as it takes bleu; the
feature reads what a utility takes from its class (a model, the sources, the tokeniser and BLEU
smoothing options, an aggregate method), never from its name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.metrics.bleu import BLEU, SMOOTHING, sentence_bleu, sentence_bleu_plus1, stats_array
from rerank.errors import InputError
from rerank.features import Feature, FeatureContext
from rerank.metrics.bertscore import BERTScoreUtility
from rerank.metrics.bleurt import BLEURTUtility
from rerank.metrics.comet import MBRUtility
from rerank.metrics.metricx import MBRUtility as MetricXUtility
from rerank.metrics.registry import objective
from rerank.nbest import NBestList
from rerank.mbr_decoders import DECODERS, check_method, decode
from rerank.mbr_matrix import matrix_store
from rerank.options import NONNEGATIVE_INT, PATH, POSITIVE, POSITIVE_INT, float_check, list_of, option
from rerank.metrics.ngrams import (NgramCounter, clipped_counts, integer_sequences, sentence_blocks, token_sequences,
                                   tokenize_many)
from rerank.plugins import PluginError, Registry

CHRF_CHAR_ORDER, CHRF_BETA = 6, 2.0


def pair_index(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(I, J, pair_offsets): every ordered pair (i, j) of rows of one list, list by list, i-major."""
    sizes = np.diff(offsets)
    pair_offsets = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
    sentence = np.repeat(np.arange(len(sizes)), sizes ** 2)
    local = np.arange(pair_offsets[-1]) - pair_offsets[sentence]
    k = sizes[sentence]
    return offsets[sentence] + local // np.maximum(k, 1), offsets[sentence] + local % np.maximum(k, 1), pair_offsets


PAIR_CHUNK = 1 << 19  # (pair, n-gram) records per step of `add_shared`: about 30 MB of work arrays at the peak


def pair_matches(ids, bounds, group, n, I, pair_offsets, offsets) -> tuple[np.ndarray, np.ndarray]:
    """(clipped n-gram matches of every pair (P,), n-gram count of every text (T,)): the distinct
    n-grams of each text and their counts (NgramCounter's columns, shared within a list), and
    sum_g min(c_i(g), c_j(g)) over the n-grams g that both texts of a pair hold, as
    sum_g [c_i >= 1][c_j >= 1] + min(c_i - 1, c_j - 1): the first term is one sparse product of
    the texts' n-gram indicator matrix (block-diagonal by list), the second the pairs of each
    n-gram's texts that hold it more than once (`add_shared`). Both cost at most the list size
    times the number of distinct n-grams, linear in the texts however often a word repeats (a
    loop over every count threshold t, [c_i >= t][c_j >= t], grew with the largest count: issue
    46). The matches are sums of integers, exact in float64 in any order."""
    rows, cols, counts = NgramCounter(ids, bounds, group).counts(n)
    n_texts = len(bounds) - 1
    totals = np.bincount(rows, weights=counts, minlength=n_texts)
    sizes = np.diff(offsets)

    def position(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        sentence = group[i]
        return pair_offsets[sentence] + (i - offsets[sentence]) * sizes[sentence] + (j - offsets[sentence])

    return row_matches(NgramRecords(rows, cols, counts, n_texts), None, position, len(I)), totals


class NgramRecords:
    """One n-gram order's records of a block's texts (NgramCounter's rows, columns and counts),
    with their indicator matrix (texts x n-grams, block-diagonal by list) built once, so that the
    matches of several sets of rows (`row_matches`, chrF's row slabs) count them once."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray, counts: np.ndarray, n_texts: int):
        from scipy import sparse  # here, not at the top: every command's start-up loads this plug-in

        self.rows, self.cols, self.counts, self.n_texts = rows, cols, counts, n_texts
        self.A = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_texts, int(cols.max(initial=-1)) + 1))
        again = counts > 1
        self.again = (rows[again], cols[again], counts[again] - 1)


def row_matches(records: NgramRecords, asked: np.ndarray | None, position, size: int) -> np.ndarray:
    """Clipped n-gram matches (size,) of every pair (i, j) of an asked row i (sorted; None: every
    text) and a text j of its list, at position(i, j): sum_g [c_i >= 1][c_j >= 1] (one sparse
    product of the asked rows of the indicator matrix with all of it) + min(c_i - 1, c_j - 1)
    over the n-grams both hold more than once (`add_shared`)."""
    matches = np.zeros(size)
    if len(records.rows) == 0:
        return matches
    A = records.A
    product = ((A if asked is None else A[asked]) @ A.T).tocoo()
    matches[position(product.row if asked is None else asked[product.row], product.col)] += product.data
    rows, cols, counts = records.again
    add_shared(matches, rows, cols, counts, position, None if asked is None else np.isin(rows, asked))
    return matches


def add_shared(matches: np.ndarray, rows: np.ndarray, cols: np.ndarray, counts: np.ndarray, position,
               left_rows: np.ndarray | None = None) -> None:
    """matches[position(i, j)] += min(c_i(g), c_j(g)) for every n-gram column g and every two
    records (i, c_i(g)), (j, c_j(g)) of it (i = j included; `left_rows`: only the records i it
    marks, the asked rows of chrF's row slabs): records sorted by column, a column's rows
    distinct. The work is the sum over left records of their column's size, PAIR_CHUNK at a time."""
    if len(rows) == 0:
        return
    starts = np.r_[True, cols[1:] != cols[:-1]]  # a column is a run of records
    head, column = np.flatnonzero(starts), np.cumsum(starts) - 1
    first, width = head[column], np.diff(np.r_[head, len(cols)])[column]  # each record's column: its first, its size
    lefts = np.arange(len(rows)) if left_rows is None else np.flatnonzero(left_rows)
    width, first = width[lefts], first[lefts]
    ends = np.cumsum(width)
    a = 0
    while a < len(lefts):
        b = max(int(np.searchsorted(ends, ends[a] - width[a] + PAIR_CHUNK, side="right")), a + 1)
        w = width[a:b]
        left = np.repeat(lefts[a:b], w)
        right = np.repeat(first[a:b] - (np.cumsum(w) - w), w) + np.arange(int(w.sum()))
        matches += np.bincount(position(rows[left], rows[right]), weights=np.minimum(counts[left], counts[right]),
                               minlength=len(matches))
        a = b


def list_of_row(offsets: np.ndarray) -> np.ndarray:
    """The list (sentence) of every row, int64 (offsets[-1],)."""
    sizes = np.diff(offsets)
    return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)


def smoothed_bleu(stats: np.ndarray, smooth: str = "add-k", value: float | None = None) -> np.ndarray:
    """Sentence BLEU of BLEU statistics rows with sacrebleu's smoothing `smooth` (its value
    `value`; None: sacrebleu's default): add-k with k = 1, the default, is BLEU+1 as it always was
    (`sentence_bleu_plus1`); exp is sacrebleu's and mbrs's sentence BLEU (`sentence_bleu`)."""
    if smooth == "add-k" and value in (None, 1, 1.0):
        return sentence_bleu_plus1(stats)
    return sentence_bleu(stats, smooth, value)


def bleu_utility(tokens: Sequence[Sequence[str]], offsets: np.ndarray, I, J, pair_offsets, smooth: str = "add-k",
                 smooth_value: float | None = None) -> np.ndarray:
    """Sentence BLEU (BLEU+1 unless `smooth` says otherwise) of every hypothesis against every
    hypothesis of its list, (P,)."""
    ids, bounds = integer_sequences(tokens)
    group = list_of_row(offsets)
    lengths = np.diff(bounds).astype(np.float64)
    orders = [pair_matches(ids, bounds, group, n, I, pair_offsets, offsets) for n in range(1, 5)]
    return smoothed_bleu(stats_array(lengths[I], lengths[J], [m for m, _ in orders], [t[I] for _, t in orders]),
                         smooth, smooth_value)


SCORE_CHUNK = 1 << 16   # pairs per call of chrF's formula (its float64 temporaries: a few MB)


def chrf_utility(texts: Sequence[str], offsets: np.ndarray, I, J, pair_offsets, word_order: int = 0) -> np.ndarray:
    """Sentence chrF (sacrebleu's formula: character 1-6-grams without whitespace), in [0, 1], of
    every pair of each list (pair_index's layout (I, J, pair_offsets)): `CHRFPairs` of every row."""
    return CHRFPairs(texts, offsets, word_order).rows(np.arange(len(texts), dtype=np.int64), I, J)


def chrf_words(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, bounds) of the words of chrF++'s word n-grams, split as sacrebleu splits them
    (`CHRF._remove_punctuation`: whitespace, then one punctuation mark off the end, else off the
    start, of every word longer than one character)."""
    from sacrebleu.metrics.chrf import CHRF

    split = CHRF(word_order=2)._remove_punctuation
    return integer_sequences([split(t) for t in texts])


class CHRFPairs:
    """chrF of the pairs of a block's texts (lists from `offsets`), the n-grams counted once:
    `rows(asked)` scores every pair (i, j) of an asked row i and a text j of its list, row-major,
    so that exact MBR over a long list takes its rows a slab at a time (`rows_expected_utility`)
    in memory bounded by the slab, not the list's n^2 pairs. Each pair keeps its clipped matches
    alone, one int32 per order (integer counts: the same numbers as float64, in any slab), each
    text its n-gram totals; the formula's statistics [hyp, ref, match] per order are laid out
    SCORE_CHUNK pairs at a time (issue 47: 1.1 GB over the shipped 50-best before)."""

    def __init__(self, texts: Sequence[str], offsets: np.ndarray, word_order: int = 0):
        from rerank.metrics.sacre import CHRFMetric

        self.metric = CHRFMetric(word_order=word_order)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.group = list_of_row(self.offsets)
        self.orders = CHRF_CHAR_ORDER + word_order
        self.totals = np.empty((len(texts), self.orders), dtype=np.float64)
        self.records: list[NgramRecords] = []
        units = [(char_sequences(texts), CHRF_CHAR_ORDER)]
        if word_order:
            units.append((chrf_words(texts), word_order))
        for (ids, bounds), unit_orders in units:
            counter = NgramCounter(ids, bounds, self.group)
            for n in range(1, unit_orders + 1):
                rows, cols, counts = counter.counts(n)
                self.totals[:, len(self.records)] = np.bincount(rows, weights=counts, minlength=len(texts))
                self.records.append(NgramRecords(rows, cols, counts, len(texts)))

    def pairs(self, asked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(I, J) of `rows(asked)`: each asked row with every text of its list, in order."""
        sizes = np.diff(self.offsets)[self.group[asked]]
        I = np.repeat(asked, sizes)
        return I, self.offsets[self.group[I]] + np.arange(len(I)) - np.repeat(np.cumsum(sizes) - sizes, sizes)

    def rows(self, asked: np.ndarray, I: np.ndarray | None = None, J: np.ndarray | None = None) -> np.ndarray:
        """chrF in [0, 1] of the pairs (I, J) = `pairs(asked)` (given: the caller's, the same), (P,)."""
        if I is None or J is None:
            I, J = self.pairs(asked)
        sizes = np.diff(self.offsets)[self.group[asked]]
        start = np.zeros(len(self.group), dtype=np.int64)
        start[asked] = np.cumsum(sizes) - sizes
        offsets, group = self.offsets, self.group

        def position(i: np.ndarray, j: np.ndarray) -> np.ndarray:
            return start[i] + (j - offsets[group[j]])

        every = len(asked) == len(group)
        matches = np.empty((len(I), self.orders), dtype=np.int32)
        for column, records in enumerate(self.records):
            matches[:, column] = row_matches(records, None if every else asked, position, len(I))
        scores = []
        for a in range(0, len(I), SCORE_CHUNK):
            chunk = slice(a, a + SCORE_CHUNK)
            stats = np.stack([self.totals[I[chunk]], self.totals[J[chunk]], matches[chunk]], axis=2)  # (pairs, order, 3)
            scores.append(np.asarray(self.metric.score_from_stats(stats.reshape(len(stats), 3 * self.orders))))
        return (np.concatenate(scores) if scores else np.zeros(0)) / 100.0


def rows_expected_utility(scorer: CHRFPairs, p: np.ndarray, candidates: np.ndarray | None,
                          step: int) -> np.ndarray:
    """Exact MBR's sum_j p_j U_ij of every row i (a candidate's; the others 0) by a scorer of row
    slabs (`CHRFPairs.rows`), at most `step` pairs a slab (a row's list at least): the values of
    block_scores' exact path, bit for bit (each row's sum runs over j in the same order; a
    pseudo-reference of posterior 0 adds 0.0), in memory linear in the slab."""
    n_texts = len(scorer.group)
    asked = np.arange(n_texts, dtype=np.int64) if candidates is None else np.flatnonzero(candidates)
    per_row = np.diff(scorer.offsets)[scorer.group[asked]]
    ends = np.cumsum(per_row)
    out = np.zeros(n_texts)
    a = 0
    while a < len(asked):
        b = max(int(np.searchsorted(ends, ends[a] - per_row[a] + step, side="right")), a + 1)
        I, J = scorer.pairs(asked[a:b])
        out += np.bincount(I, weights=p[J] * scorer.rows(asked[a:b], I, J), minlength=n_texts)
        a = b
    return out


def ter_values(texts: Sequence[str], I, J) -> np.ndarray:
    """Sentence TER (sacrebleu's numbers, with shifts) of every pair as a fraction, the metric's own
    value (lower is better): rerank.metrics.ter.pair_ter, which tokenises each text once and runs
    every distinct pair through the compiled edit distance in one call."""
    from rerank.metrics.ter import pair_ter

    return pair_ter(texts, I, J)


def ter_utility(texts: Sequence[str], I, J) -> np.ndarray:
    """Minus sentence TER of every pair: `ter_values` oriented by the registry (higher is better)."""
    return objective(ter_values(texts, I, J), "ter")


def posterior(scores: np.ndarray, offsets: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Softmax of scores / temperature within every list."""
    if not temperature > 0:
        raise InputError(f"the MBR temperature must be > 0, got {temperature}")
    x = np.asarray(scores, dtype=np.float64) / temperature
    sizes = np.diff(offsets)
    starts = offsets[:-1][sizes > 0]
    peak = np.repeat(np.maximum.reduceat(x, starts), sizes[sizes > 0]) if len(x) else x
    e = np.exp(x - peak)
    return e / np.repeat(np.add.reduceat(e, starts), sizes[sizes > 0]) if len(x) else e


def expected_utility(U: np.ndarray, I: np.ndarray, p: np.ndarray, n_hyps: int) -> np.ndarray:
    """sum_j p_j U_ij for every row i (pairs (I, J) from pair_index; p_j gathered by the caller)."""
    return np.bincount(I, weights=p * U, minlength=n_hyps)


# ---- reference aggregation (method "aggregate") ----------------------------------------------

def char_sequences(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, bounds) of the non-whitespace characters of every text (chrF's units), as
    `integer_sequences` gives them but without a Python step per character: the texts' code
    points come from one UTF-32 encoding, and ids are the ranks of the code points present."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    present = np.unique(points) if len(points) <= 4096 else np.flatnonzero(np.bincount(points))
    space = np.fromiter((chr(c).isspace() for c in present.tolist()), dtype=bool, count=len(present))
    keep = ~np.isin(points, present[space]) if space.any() else np.ones(len(points), dtype=bool)
    text = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(text[keep], minlength=len(texts)))]).astype(np.int64)
    kept = present[~space]
    return np.searchsorted(kept, points[keep]).astype(np.int64), bounds


def aggregate_matches(counter: NgramCounter, group, p, n) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n-gram count of every text, its list's expected n-gram count, clipped matches
    sum_g min(c_i(g), E[c](g)) against its list's aggregate reference), each (T,)."""
    rows, cols, counts = counter.counts(n)
    expected = np.bincount(cols, weights=p[rows] * counts, minlength=int(cols.max(initial=-1)) + 1)
    matches, totals = clipped_counts(rows, cols, counts, expected, len(group))
    return totals, expected_per_list(totals, group, p), matches


def expected_per_list(values: np.ndarray, group: np.ndarray, p: np.ndarray) -> np.ndarray:
    """sum_j p_j values_j over each row's own list, for every row."""
    return np.bincount(group, weights=p * values, minlength=int(group.max(initial=-1)) + 1)[group]


# ---- the utilities: one class each, in one registry with the plug-ins' ----------------------------

class TextUtility:
    """An MBR utility of the hypotheses' texts alone, no model: bleu, chrf, ter, and a plug-in's
    (entry-point group rerank.mbr_utilities) that subclasses it. A utility class, text or model,
    has `exact(sources, texts, group, I, J)`: U(texts[i], texts[j]) of every pair (I[k], J[k]) of
    rows of one list, (P,), higher is better; and, where it has an aggregate reference,
    `aggregate(sources, texts, group, p)`: every row against its list's posterior-weighted
    aggregate, (T,) (a class without it is exact only, and says why in `no_aggregate`). `group`:
    the list of every row; `sources`: one source sentence per list, read where `needs_sources`.

    A text utility is made from the MBR options its class names in `options` (out of tokenize,
    bleu_smooth, bleu_smooth_value; `mbr_scores` passes it those alone, and refuses a BLEU
    smoothing for a class that takes none); a model utility (`needs_model`: comet, sim, mlmme)
    from its model file (`make_utility`)."""

    needs_model = False
    needs_sources = False
    options: tuple[str, ...] = ()
    no_aggregate = ""

    def exact(self, sources: Sequence[str] | None, texts: Sequence[str], group: np.ndarray, I: np.ndarray,
              J: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def row_offsets(group: np.ndarray) -> np.ndarray:
    """The row offsets of the lists of `group` (the inverse of `list_of_row`, but for trailing
    lists without rows, which hold no pair)."""
    return np.concatenate([[0], np.cumsum(np.bincount(group))]).astype(np.int64)


def every_pair(score, group: np.ndarray, I: np.ndarray, J: np.ndarray) -> np.ndarray:
    """The values of `score(offsets, I, J, pair_offsets)`, a utility that scores every pair of each
    list at once (pair_index's layout: bleu and chrf count all of a list's n-gram matches in one
    product), at the pairs (I, J) asked: its values themselves when those are every pair in that
    order (what block_scores asks unless some rows are no candidate or no pseudo-reference),
    otherwise every pair's values gathered at theirs."""
    offsets = row_offsets(group)
    sizes = np.diff(offsets)
    pair_offsets = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
    g = group[I]
    position = pair_offsets[g] + (I - offsets[g]) * sizes[g] + (J - offsets[g])
    if len(position) == pair_offsets[-1] and np.array_equal(position, np.arange(len(position))):
        return score(offsets, I, J, pair_offsets)
    every_I, every_J, _ = pair_index(offsets)
    return score(offsets, every_I, every_J, pair_offsets)[position]


class BLEUUtility(TextUtility):
    """Sentence BLEU (BLEU+1 unless `bleu_smooth` says otherwise: `smoothed_bleu`) on the
    `tokenize` tokens, exact and against the aggregate reference of posterior-expected n-gram
    counts and reference length."""

    options = ("tokenize", "bleu_smooth", "bleu_smooth_value")
    scores_every_pair = True   # `exact` counts every pair of a list in one product (rerank.mbr_decoders.PairScorer)

    def __init__(self, tokenize: str = "13a", bleu_smooth: str = "add-k", bleu_smooth_value: float | None = None):
        self.tokenize, self.smooth, self.smooth_value = tokenize, bleu_smooth, bleu_smooth_value

    def exact(self, sources, texts, group, I, J):
        tokens = tokenize_many(texts, self.tokenize)
        return every_pair(lambda offsets, I, J, pair_offsets: bleu_utility(tokens, offsets, I, J, pair_offsets,
                                                                           self.smooth, self.smooth_value), group, I, J)

    def aggregate(self, sources, texts, group, p):
        ids, bounds = token_sequences(texts, self.tokenize)
        lengths = np.diff(bounds).astype(np.float64)
        counter = NgramCounter(ids, bounds, group)
        orders = [aggregate_matches(counter, group, p, n) for n in range(1, 5)]
        return smoothed_bleu(stats_array(lengths, expected_per_list(lengths, group, p), [m for _, _, m in orders],
                                         [t for t, _, _ in orders]), self.smooth, self.smooth_value)


class CHRFUtility(TextUtility):
    """Sentence chrF (sacrebleu's formula: character 1-6-grams without whitespace), in [0, 1],
    exact and against the aggregate reference of expected character n-gram counts and totals
    (`chrf_word_order` > 0, `--mbr-chrf-word-order`: word n-grams too, 2 = sacrebleu's chrF++,
    its words split as sacrebleu splits them, `chrf_words`)."""

    scores_every_pair = True   # `exact` counts every pair of a list in one product (rerank.mbr_decoders.PairScorer)
    options = ("chrf_word_order",)

    def __init__(self, chrf_word_order: int = 0):
        self.word_order = chrf_word_order

    def exact(self, sources, texts, group, I, J):
        return every_pair(lambda offsets, I, J, pair_offsets: chrf_utility(texts, offsets, I, J, pair_offsets,
                                                                           self.word_order), group, I, J)

    def rows_scorer(self, texts: Sequence[str], offsets: np.ndarray) -> CHRFPairs:
        """The block's n-grams counted once, its rows scored a slab at a time (exact MBR over long lists)."""
        return CHRFPairs(texts, offsets, self.word_order)

    def aggregate(self, sources, texts, group, p):
        from rerank.metrics.sacre import CHRFMetric

        metric = CHRFMetric(word_order=self.word_order)
        columns: list[np.ndarray] = []
        units = [(char_sequences(texts), CHRF_CHAR_ORDER)]
        if self.word_order:
            units.append((chrf_words(texts), self.word_order))
        for (ids, bounds), orders in units:
            counter = NgramCounter(ids, bounds, group)
            for n in range(1, orders + 1):
                columns += aggregate_matches(counter, group, p, n)
        return np.asarray(metric.score_from_stats(np.stack(columns, axis=1))) / 100.0


class TERUtility(TextUtility):
    """Minus sentence TER (sacrebleu's numbers, `ter_utility`), pair by pair: exact only."""

    no_aggregate = ("the aggregate MBR method needs an n-gram utility (bleu or chrf): TER's edit distance has no "
                    "expected reference to score against; use the exact method for ter")

    def exact(self, sources, texts, group, I, J):
        return ter_utility(texts, I, J)


def check_utility(name: str, cls: object) -> None:
    """A plug-in MBR utility is a class with an `exact` method."""
    if not (isinstance(cls, type) and callable(getattr(cls, "exact", None))):
        what = f"the class {cls.__name__}" if isinstance(cls, type) else f"a {type(cls).__name__}"
        raise PluginError(f"plug-in {name!r} of rerank.mbr_utilities is {what}, not an MBR utility class (one with "
                          "exact and aggregate methods, rerank.consensus.TextUtility)")


def needs_model(cls: type) -> bool:
    """Whether the utility class scores with a model file (`make_utility`); a class that does not
    say is one (the plug-in interface had model utilities only: sim, mlmme)."""
    return bool(getattr(cls, "needs_model", True))


BUILTIN_UTILITIES: dict[str, type] = {"bleu": BLEUUtility, "chrf": CHRFUtility, "ter": TERUtility, "comet": MBRUtility,
                                     "bertscore": BERTScoreUtility, "bleurt": BLEURTUtility, "metricx": MetricXUtility}
UTILITIES = tuple(BUILTIN_UTILITIES)
# every MBR utility: the built-in ones, then the plug-ins of the entry-point group rerank.mbr_utilities
# (rerank.embeddings: sim, a sentence-transformers cosine; mlmme, the cosine of this project's MLMME/VSE
# embeddings; a model utility is made from (path, batch_size, device, cache, lang=the hypotheses' language))
MBR_UTILITIES: Registry[type] = Registry("rerank.mbr_utilities", "MBR utility", lambda: BUILTIN_UTILITIES,
                                         check_utility)


# ---- the feature -------------------------------------------------------------------------------

METHODS = ("exact", "aggregate", *DECODERS)   # the decoders: rerank.mbr_decoders
BLOCK_PAIRS = 125_000     # exact: pairs per block (chrF: about 0.5 KB each at the peak; 2,000,000 held 1.1 GB
                          # over the shipped 50-best, and small blocks are no slower: issue 47)
ROW_SLAB_PAIRS = 1 << 18   # exact chrF over longer lists (n > 512): pairs per slab of rows (rows_expected_utility)
BLOCK_HYPS = 1_000        # aggregate: hypotheses per block (small blocks sort in cache: faster)
MODEL_BLOCK_PAIRS = 100_000   # a model utility, exact: pairs per block (their embeddings are in memory)
MODEL_BLOCK_HYPS = 5_000      # a model utility, aggregate: hypotheses per block
DROPPED_MARGIN = 1e-6         # a row a decoder drops: its list's lowest kept value less this (1e-4 points), so
                              # that a tie never puts the decision on it (rerank.mbr_decoders)


def block_scores(texts: list[str], offsets: np.ndarray, p: np.ndarray, utility, method: str,
                 candidates: np.ndarray | None = None, sources: Sequence[str] | None = None,
                 options: MBROptions | None = None, first_list: int = 0) -> np.ndarray:
    """The mbr feature (in [0, 1]) of the rows of whole lists by the `utility` object: texts,
    offsets from 0, posteriors (0 for a row that is no pseudo-reference). Exact MBR asks the
    utility for the pairs of a candidate and a pseudo-reference alone (`candidates`; the caller
    overwrites the other rows); the sum over the others' pairs would add only zeros. The other
    decoders (centroid, probabilistic, pruning, c2f: rerank.mbr_decoders.decode, with their
    settings from `options` and `first_list`, the index of the block's first list, for their
    seeds) give NaN for every row they do not score."""
    group = list_of_row(offsets)
    if method in DECODERS:
        return decode(options if options is not None else MBROptions(method=method), utility, texts, group, p,
                      candidates, sources, first_list)
    if method == "aggregate":
        return utility.aggregate(sources, texts, group, p)
    if (hasattr(utility, "rows_scorer") and not getattr(utility, "holds_matrix", False)
            and int((np.diff(offsets) ** 2).sum()) > ROW_SLAB_PAIRS):   # a long list, its rows a slab at a time
        return rows_expected_utility(utility.rows_scorer(texts, offsets), p, candidates, ROW_SLAB_PAIRS)
    if hasattr(utility, "expected_exact"):   # a utility's own sum over its pairs (a matrix folder's, too)
        return utility.expected_exact(sources, texts, offsets, p)
    I, J, _ = pair_index(offsets)
    if candidates is not None or not np.all(p > 0):
        keep = (p[J] > 0) & (np.ones(len(I), dtype=bool) if candidates is None else candidates[I])
        I, J = I[keep], J[keep]
    return expected_utility(utility.exact(sources, texts, group, I, J), I, p[J], len(texts))


def mbr_scores(nbest: NBestList, scores: np.ndarray, options: MBROptions | None = None, *,
               candidates: np.ndarray | None = None, model=None, sources: Sequence[str] | None = None,
               lowercase: bool = False, block_pairs: int = BLOCK_PAIRS, block_hyps: int = BLOCK_HYPS) -> np.ndarray:
    """The mbr feature of every hypothesis, in percent (see the module doc), computed a block of
    whole lists at a time: at most block_pairs pairs (exact) or block_hyps hypotheses (aggregate).

    `options` (the feature's `MBROptions`; None: the defaults) gives the utility, the temperature,
    the method, the bleu utility's tokeniser and smoothing (`bleu_smooth`, sacrebleu's names, with
    `bleu_smooth_value`: add-k (k = 1: BLEU+1, the default), exp (sacrebleu's sentence BLEU,
    mbrs's), floor or none) and `references`: only each list's `references` most probable rows are
    pseudo-references, their posterior renormalised over them (None: every row, as in standard
    MBR). Its other fields are what the feature reads the keywords from: `candidates` (a bool per
    row, `top_rows`, from the option's NAME:K): only those rows are scored; every other row gets
    its list's lowest candidate value, so that no non-candidate outranks a candidate by this
    feature (the `mbr_candidate` column says which rows were candidates). A model utility (comet,
    a plug-in's: `utility_names`) needs `model`, its object (`make_utility`, from the option's
    path), and, if it reads them, `sources`, one per list. `lowercase`: the texts are compared
    lowercased."""
    options = MBROptions() if options is None else options
    if not isinstance(options, MBROptions):
        raise TypeError(f"options must be an MBROptions or None, not {type(options).__name__}")
    utility, temperature, method = options.utility, options.temperature, options.method
    bleu_smooth, bleu_smooth_value, references = options.bleu_smooth, options.bleu_smooth_value, options.references
    cls = utility_class(utility)
    if bleu_smooth not in SMOOTHING:
        raise InputError(f"unknown BLEU smoothing {bleu_smooth!r} (known: {', '.join(SMOOTHING)})",
                         option="bleu_smooth")
    takes = getattr(cls, "options", ())
    if "bleu_smooth" not in takes and (bleu_smooth != "add-k" or bleu_smooth_value is not None):
        raise InputError(f"the BLEU smoothing (bleu_smooth) is the bleu utility's; the {utility} utility has none",
                         option="bleu_smooth")
    if "chrf_word_order" not in takes and options.chrf_word_order:
        raise InputError(f"chrf_word_order is the chrf utility's; the {utility} utility has no word n-grams",
                         option="chrf_word_order")
    if bleu_smooth_value is not None and (bleu_smooth not in ("add-k", "floor") or not bleu_smooth_value > 0):
        raise InputError(f"bleu_smooth_value is a number > 0 for add-k or floor, got {bleu_smooth_value!r} "
                         f"with bleu_smooth {bleu_smooth}", option="bleu_smooth_value", mentions=("bleu_smooth",))
    if "tokenize" in takes and options.tokenize not in BLEU.TOKENIZERS:
        raise InputError(f"tokenize {options.tokenize!r} is no BLEU tokeniser (known: {', '.join(BLEU.TOKENIZERS)})",
                         option="tokenize")
    if method not in METHODS:
        raise InputError(f"unknown MBR method {method!r} (known: {', '.join(METHODS)})")
    if (model is None) == needs_model(cls):
        raise InputError(f"the {utility} MBR utility needs its model (model)" if model is None else
                         f"a model (model) is for a model utility; the {utility} utility has none", option="model")
    if model is None:
        given = {"tokenize": options.tokenize, "bleu_smooth": bleu_smooth, "bleu_smooth_value": bleu_smooth_value,
                 "chrf_word_order": options.chrf_word_order}
        model = cls(**{name: value for name, value in given.items() if name in takes})
    if getattr(model, "needs_sources", True) and (sources is None or len(sources) != nbest.n_sentences):
        raise InputError(f"the {utility} MBR utility needs one source sentence per list (sources)", option="sources")
    if method == "aggregate" and getattr(cls, "aggregate", None) is None:
        raise InputError("method aggregate: " + (getattr(cls, "no_aggregate", "") or f"the {utility} MBR utility has "
                                                  "no aggregate method: use the exact method"), option="method")
    check_method(options, utility, cls)
    if not (block_pairs >= 1 and block_hyps >= 1):
        raise InputError(f"MBR block sizes must be >= 1, got {block_pairs} pairs and {block_hyps} hypotheses")
    if len(scores) != nbest.n_hyps:
        raise InputError(f"MBR scores: {len(scores)} values for {nbest.n_hyps} hypotheses")
    if references is not None and not POSITIVE_INT.accepts(references):
        raise InputError(f"references must be {POSITIVE_INT.what}, got {references!r}", option="references")
    offsets = np.asarray(nbest.offsets, dtype=np.int64)
    sizes = np.diff(offsets)
    p = posterior(scores, offsets, temperature)
    keep = top_rows(p, offsets, references) if references is not None else None
    if keep is not None and not keep.all():  # the top `references` by posterior, renormalised over them
        p = np.where(keep, p, 0.0)
        p = p / np.repeat(np.add.reduceat(p, offsets[:-1][sizes > 0]), sizes[sizes > 0])
    out = np.zeros(nbest.n_hyps)
    cost, budget = (sizes, block_hyps) if method == "aggregate" else (sizes ** 2, block_pairs)
    if needs_model(cls):  # a block's sentence embeddings are in memory: a few thousand lists at most
        budget = min(budget, MODEL_BLOCK_HYPS if method == "aggregate" else MODEL_BLOCK_PAIRS)
    store = matrix_store(options, model, lowercase, sizes)   # None without a utility matrix folder
    with store if store is not None else contextlib.nullcontext():
        for a, b in sentence_blocks(cost, budget):
            lo, hi = int(offsets[a]), int(offsets[b])
            if hi > lo:
                texts = nbest.hyps[lo:hi]
                texts = [h.lower() for h in texts] if lowercase else list(texts)
                scorer = model if store is None else store.wrap(model, int(a), offsets[a:b + 1] - lo)
                out[lo:hi] = block_scores(texts, offsets[a:b + 1] - lo, p[lo:hi], scorer, method,
                                          None if candidates is None else candidates[lo:hi],
                                          None if sources is None else list(sources[a:b]), options, int(a))
    dropped = np.isnan(out)   # the rows a decoder did not score (rerank.mbr_decoders): strictly below the others
    kept = ~dropped if candidates is None else candidates & ~dropped
    if not kept.all():
        out = mark_non_candidates(out, kept, offsets)
        out[dropped] -= DROPPED_MARGIN
    return 100.0 * out


def gram_values(vectors: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Every pair's dot product v_i . v_j within each list of `offsets`, in pair_index's layout
    (each list's n x n Gram matrix, row-major, the lists in order)."""
    sizes = np.diff(offsets)
    if len(sizes) and (sizes == sizes[0]).all():
        n = int(sizes[0])
        stacked = vectors[offsets[0]:offsets[-1]].reshape(len(sizes), n, -1)
        return np.matmul(stacked, stacked.transpose(0, 2, 1)).ravel()
    parts = [vectors[a:b] @ vectors[a:b].T for a, b in zip(offsets[:-1], offsets[1:]) if b > a]
    return np.concatenate([part.ravel() for part in parts]) if parts else np.zeros(0)


def matrix_expected(values: np.ndarray, offsets: np.ndarray, p: np.ndarray) -> np.ndarray:
    """sum_j p_j U_ij of every row from the lists' utility matrices in pair_index's layout (`values`:
    each list's n x n matrix, row-major, the lists in order): one batched matrix-vector product
    when the lists are of one size, else one per list. A utility matrix folder
    (rerank.mbr_matrix) answers through it too, so that its values give the same bits."""
    sizes = np.diff(offsets)
    if len(sizes) and (sizes == sizes[0]).all():
        n = int(sizes[0])
        return np.matmul(values.reshape(len(sizes), n, n), p[offsets[0]:offsets[-1]].reshape(len(sizes), n, 1)).ravel()
    out = np.zeros(len(p))
    start = 0
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        n = b - a
        if n:
            out[a:b] = values[start:start + n * n].reshape(n, n) @ p[a:b]
        start += n * n
    return out


class VectorUtility:
    """An MBR utility that is the dot product of unit vectors, U(h_i, h_j) = v_i . v_j (a plug-in
    gives `vectors(texts)`, float64, one row per text). Exact MBR, sum_j p_j v_i . v_j, equals
    v_i . (sum_j p_j v_j) because the dot product is linear, so `aggregate` (one product per
    hypothesis with its list's posterior-weighted mean vector) gives the same values in linear time.
    Its subclasses are model utilities (made from a model file, `make_utility`)."""

    needs_model = True
    needs_sources = False

    def vectors(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def exact(self, sources, texts, group, I, J) -> np.ndarray:
        """v_i . v_j at the pairs asked, from each list's Gram matrix (one matrix product per list,
        or one batched product when the lists are of one size), not from two gathered (pairs, d)
        copies of the vectors (issue 47: 31-84x faster on random unit vectors, d 300-1024)."""
        vectors = self.block_vectors(texts)
        return every_pair(lambda offsets, _I, _J, _pair_offsets: gram_values(vectors, offsets), group, I, J)

    def expected_exact(self, sources, texts, offsets: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Exact MBR's sum_j p_j v_i . v_j of every row: each list's Gram matrix times its posterior
        (`matrix_expected`), without the pair indices and gathers of the generic path (`block_scores`:
        pair_index, `exact`, expected_utility), which cost more than the products at n = 1,024
        (issue 47's frontier). The same sums, to rounding (tests/test_mbr_decoders.py)."""
        return matrix_expected(gram_values(self.block_vectors(texts), offsets), offsets, p)

    def aggregate(self, sources, texts, group, p) -> np.ndarray:
        vectors = self.block_vectors(texts)
        mean = np.zeros((int(group.max(initial=-1)) + 1, vectors.shape[1]))
        np.add.at(mean, group, p[:, None] * vectors)
        return np.einsum("ij,ij->i", vectors, mean[group])

    embeds = True   # the interface of the centroid method (rerank.mbr_decoders): embed, centre, against

    def embed(self, sources, texts, group) -> np.ndarray:
        """The vectors of the rows, (T, d): what the centroid method clusters."""
        return self.block_vectors(texts)

    def block_vectors(self, texts) -> np.ndarray:
        """`vectors(texts)`, the last block's kept, so that a decoder that reads a block twice (c2f:
        the aggregate method, then pairs) encodes it once."""
        key = tuple(texts)
        kept = getattr(self, "_block", None)
        if kept is None or kept[0] != key:
            kept = self._block = (key, self.vectors(list(texts)))
        return kept[1]

    @staticmethod
    def centre(centroids: np.ndarray) -> np.ndarray:
        """The reference vector of each k-means centroid: its direction (the utility is a cosine;
        a zero centroid stays 0)."""
        norms = np.linalg.norm(centroids, axis=1)
        return centroids / np.where(norms > 0, norms, 1.0)[:, None]

    def against(self, sources, group, vectors: np.ndarray, I: np.ndarray, references: np.ndarray,
                K: np.ndarray) -> np.ndarray:
        """U of the rows I (their `vectors`) against the reference vectors references[K], (P,):
        the dot product, as `exact` takes it. The pairs of one list (`group` of their rows) are one
        product of its rows' vectors and its references', read at the pairs, instead of two gathered
        (pairs, d) copies (at n = 1,024 the gathers cost as much as the k-means: issue 47's frontier)."""
        out = np.empty(len(I))
        if len(I) == 0:
            return out
        lists = np.asarray(group)[I]
        order = np.argsort(lists, kind="stable")
        for part in np.split(order, np.flatnonzero(np.diff(lists[order])) + 1):
            rows, row_at = np.unique(I[part], return_inverse=True)
            refs, ref_at = np.unique(K[part], return_inverse=True)
            out[part] = (vectors[rows] @ references[refs].T)[row_at, ref_at]
        return out


def utility_names() -> tuple[str, ...]:
    """Every MBR utility: the built-in ones (bleu, chrf, ter, comet) and the installed plug-ins'."""
    return MBR_UTILITIES.names()


def utility_class(utility: str):
    """The class of the MBR utility named `utility`; an unknown name is an InputError about the option."""
    if utility not in MBR_UTILITIES:
        raise InputError(f"utility {utility!r} is no MBR utility (known: {', '.join(MBR_UTILITIES.names())})",
                         option="utility")
    return MBR_UTILITIES[utility]


def make_utility(utility: str, path: str | None, batch_size: int | None, context: FeatureContext | None = None):
    """The object of a model utility (None for a text utility, which `mbr_scores` makes from its
    options), from its model `path`, loaded lazily; `context` gives the device, threads and score
    cache. A model for a text utility, or a model utility without one, is an InputError."""
    context = context or FeatureContext()
    cls = utility_class(utility)
    if not needs_model(cls):
        if path is not None or batch_size is not None:
            models = ", ".join(name for name, c in MBR_UTILITIES.items() if needs_model(c))
            raise InputError(f"model and batch_size are for a model utility ({models}); the {utility} utility has "
                             "none", option="model", mentions=("batch_size",))
        return None
    if not path:
        raise InputError(f"the {utility} MBR utility needs its model (model)", option="model")
    from_context = getattr(cls, "from_context", None)
    if from_context is not None:   # the utility applies the context itself (threads: torch's or its own)
        return from_context(path, batch_size, context)
    context.use_threads()
    return cls(path, batch_size, context.device, context.cache, lang=context.tgt_lang)


def top_rows(values: np.ndarray, offsets: np.ndarray, k: int) -> np.ndarray:
    """A bool per row: whether it is among the `k` highest `values` of its list (ties: the earlier
    row first), every row of a list of at most k."""
    rows = np.arange(len(values))
    group = list_of_row(offsets)
    order = np.lexsort((rows, -np.asarray(values, dtype=np.float64), group))   # by list, value down, row
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = rows - np.repeat(offsets[:-1], np.diff(offsets))
    return rank < k


def mark_non_candidates(values: np.ndarray, candidates: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """`values` with every non-candidate row set to its list's lowest candidate value (a list
    without candidates keeps 0): a feature column is finite, and this ranks no non-candidate above
    a candidate."""
    group = list_of_row(offsets)
    lowest = np.full(len(offsets) - 1, np.inf)
    np.minimum.at(lowest, group[candidates], values[candidates])
    lowest[~np.isfinite(lowest)] = 0.0
    return np.where(candidates, values, lowest[group])


RATIO = float_check("a number in (0, 1]", lambda v: 0 < v <= 1)
POSTERIORS = ("softmax", "uniform", "counts")


@dataclass(frozen=True)
class MBROptions:
    """Options of the mbr feature (flags of `rerank features`: --mbr-utility, --mbr-temperature,
    --mbr-score-feature, --mbr-tokenize, --mbr-chrf-word-order, --mbr-method, --mbr-bleu-smooth, --mbr-bleu-smooth-value,
    --mbr-candidates, --mbr-references, --mbr-matrix (rerank.mbr_matrix), and the decoders'
    --mbr-centroids, --mbr-sample-ratio, --mbr-rank, --mbr-pruning-schedule, --mbr-pruning-alpha,
    --mbr-c2f-k, --mbr-seed: rerank.mbr_decoders)."""

    utility: str = option("bleu", "utility: sentence BLEU+1 (bleu), chrF, -TER, comet (a reference-based COMET "
                          "checkpoint as --mbr-model, with --src), bertscore and bleurt (BERTScore F1, BLEURT: a model "
                          "directory as --mbr-model; exact only), metricx (-MetricX: a reference-based MetricX "
                          "checkpoint directory as --mbr-model, with --src; the decision minimises the expected "
                          "MetricX) or an installed plug-in's (sim: the cosine of a "
                          "sentence-transformers encoder, --mbr-model DIR; mlmme: of an MLMME/VSE model, "
                          "--mbr-model MODEL.pt)", metavar="NAME")
    temperature: float = option(1.0, "posterior = softmax(score / T) within each list", check=POSITIVE)
    score_feature: str | None = option(None, "the model log-probability column for the posterior, or `total` for "
                                       "the lists' total scores", metavar="NAME",
                                       default_text="nmt when the list has it, else total")
    posterior: str | None = option(None, "the pseudo-references' weights: softmax (of the score feature / T), "
                                   "uniform, or counts (each row's `count` column over its list's total: the Monte "
                                   "Carlo estimate over samples, duplicates with their multiplicity)",
                                   choices=POSTERIORS, metavar="KIND",
                                   default_text="counts for a list `rerank generate` sampled (its OUT.config.json "
                                   "says so), else softmax")
    tokenize: str = option("13a", "BLEU tokeniser for the bleu utility")
    chrf_word_order: int = option(0, "word n-gram orders of the chrf utility besides its 6 character orders: 0 is "
                                  "chrF, 2 is chrF++ (sacrebleu's word_order)", choices=tuple(range(7)))
    method: str = option("exact", "exact: every pair of each list (quadratic in the list size); aggregate: each "
                         "hypothesis against one aggregate reference per list (linear; bleu, chrf, comet, sim, "
                         "mlmme); centroid: against the k-means centroids of the pseudo-references' embeddings "
                         "(comet, sim, mlmme); probabilistic: a sampled fraction of the pairs, the rest completed at "
                         "low rank; pruning: confidence-based pruning on a growing sample of pseudo-references; c2f: "
                         "aggregate picks the K best, exact MBR among them", choices=METHODS)
    bleu_smooth: str = option("add-k", "sentence BLEU smoothing of the bleu utility, sacrebleu's names: add-k (k = 1: "
                              "BLEU+1), exp (sacrebleu's sentence BLEU, as mbrs scores), floor, none", choices=SMOOTHING)
    bleu_smooth_value: float | None = option(None, "the value of add-k or floor", check=POSITIVE, metavar="X",
                                             default_text="sacrebleu's: 1 for add-k, 0.1 for floor")
    candidates: str | None = option(None, "only each list's K highest hypotheses by column NAME (e.g. qe, nmt) are "
                                    "scored; the others get their list's lowest candidate value, and the column "
                                    "mbr_candidate (--which mbr,mbr_candidate) says which were candidates",
                                    metavar="NAME:K", default_text="every hypothesis")
    model: str | None = option(None, "the model of a model utility: a reference-based COMET checkpoint for comet "
                               "(COMET-22: each hypothesis encoded once; other classes: COMET's predict per pair, "
                               "exact only), a transformers model directory for bertscore, a BLEURT model "
                               "directory for bleurt, a MetricX checkpoint directory for metricx, a sentence-transformers "
                               "directory for sim, an MLMME/VSE model.pt for "
                               "mlmme", check=PATH, metavar="PATH", default_text="none, needed for comet, sim, mlmme")
    batch_size: int | None = option(None, "sentences per encoder batch of a model utility (metricx: padded input "
                                    "tokens per batch)", check=POSITIVE_INT, metavar="N",
                                    default_text="the utility's: 16 for comet, 64 for sim, 4096 tokens for metricx")
    references: int | None = option(None, "only each list's K most probable hypotheses are pseudo-references (their "
                                    "posterior renormalised)", check=POSITIVE_INT, metavar="K",
                                    default_text="every hypothesis")
    matrix: str | None = option(None, "a folder for each list's utility matrix: written by the exact method when it "
                                "holds none, read when it does (checked against the lists' texts and the utility), "
                                "so that another temperature, limit or decoder (c2f, pruning, probabilistic) reuses "
                                "it (docs/features.md)",
                                check=PATH, metavar="DIR", default_text="none: not kept")
    centroids: int = option(8, "centroid method: k-means centroids per list (as mbrs); at least the pseudo-references: "
                            "exact MBR", check=POSITIVE_INT, metavar="K")
    sample_ratio: float = option(0.125, "probabilistic method: the fraction of each list's hypothesis x "
                                 "pseudo-reference utilities computed (mbrs's reduction factor 8); 1: exact MBR",
                                 check=RATIO, metavar="R")
    rank: int = option(8, "probabilistic method: the rank of the completed utility matrix (as mbrs)",
                       check=POSITIVE_INT, metavar="N")
    pruning_schedule: list[int] = option([8, 16, 32, 64, 128, 256], "pruning method: the number of pseudo-references "
                                         "at each step, growing (as mbrs; the last step's are all that are used)",
                                         check=list_of(POSITIVE_INT, "positive integers"), metavar="N,N,...")
    pruning_alpha: float = option(0.99, "pruning method: a hypothesis is pruned when its bootstrap probability of "
                                  "doing at least as well as the current best is at most 1 - alpha (as mbrs)",
                                  check=RATIO, metavar="A")
    c2f_k: int = option(8, "c2f method: the hypotheses per list that the aggregate method keeps for exact MBR",
                        check=POSITIVE_INT, metavar="K")
    seed: int = option(0, "the seed of the centroid (k-means++), probabilistic (sample, start) and pruning (order, "
                       "bootstrap) methods", check=NONNEGATIVE_INT, metavar="N")


class MBRFeature(Feature):
    """`rerank features NBEST --which mbr`: the consensus feature, no model and no reference needed."""

    columns = ("mbr", "mbr_candidate")
    description = ("minimum-Bayes-risk expected utility of each hypothesis against the rest of its list, "
                   "weighted by the model posterior (no model or reference needed)")
    Options = MBROptions
    option_prefix = "mbr-"

    def compute(self, nbest, which, context=None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        candidates = self.candidates(nbest, options.candidates, context.nbest_path)
        if "mbr_candidate" in which and candidates is None:
            raise InputError("the column mbr_candidate needs the MBR candidates option (candidates)",
                             context.nbest_path, option="candidates")
        model = make_utility(options.utility, options.model, options.batch_size, context)
        out = {}
        if "mbr" in which:
            scores = self.posterior_scores(nbest, options, context.nbest_path)
            out["mbr"] = mbr_scores(nbest, scores, options, candidates=candidates, model=model, sources=context.sources)
        if "mbr_candidate" in which and candidates is not None:
            out["mbr_candidate"] = candidates.astype(np.float64)
        return out

    @classmethod
    def posterior_scores(cls, nbest: NBestList, options: MBROptions, path: str) -> np.ndarray:
        """The scores whose softmax at the temperature is the posterior: the score feature's for
        softmax; log(count) for counts (softmax at T = 1 of log counts is count / the list's draws);
        zeros for uniform. The default is counts for a list `rerank generate` sampled, else softmax."""
        from rerank.generation import generated_by

        kind = options.posterior
        if kind is None:
            made = generated_by(path)
            kind = "counts" if made is not None and made.get("search") == "sample" else "softmax"
        if kind == "softmax":
            return cls.scores(nbest, options.score_feature, path)
        for name, value, default in (("temperature", options.temperature, 1.0), ("score_feature", options.score_feature, None)):
            if value != default:
                raise InputError(f"{name} is for posterior softmax, not {kind}", path, option=name,
                                 mentions=("posterior",))
        if kind == "uniform":
            return np.zeros(nbest.n_hyps)
        if "count" not in nbest.feature_names:
            raise InputError("posterior counts needs the column count, the times each candidate was "
                             f"drawn (`rerank generate` writes it; the list has {', '.join(nbest.feature_names) or 'no features'})",
                             path, option="posterior")
        counts = nbest.column("count")
        offsets = np.asarray(nbest.offsets, dtype=np.int64)
        totals = np.bincount(list_of_row(offsets), weights=counts, minlength=len(offsets) - 1)
        if not (np.all(counts >= 0) and np.all(totals[np.diff(offsets) > 0] > 0)):
            raise InputError("posterior counts needs counts >= 0 with a positive total in every list",
                             path, option="posterior")
        with np.errstate(divide="ignore"):
            return np.log(counts)

    @staticmethod
    def candidates(nbest: NBestList, spec: str | None, path: str) -> np.ndarray | None:
        """The candidate rows of `NAME:K` (each list's K highest values of column NAME), or None."""
        if spec is None:
            return None
        name, sep, k = spec.rpartition(":")
        if not sep or not name or not k.strip().isdigit() or int(k) < 1:
            raise InputError(f"candidates {spec!r}: expected NAME:K, a column and a positive integer (e.g. qe:8)",
                             path, option="candidates")
        if name not in nbest.feature_names:
            raise InputError(f"candidates {spec!r}: no column {name!r} (the list has "
                             f"{', '.join(nbest.feature_names) or 'no features'})", path, option="candidates")
        return top_rows(nbest.column(name), np.asarray(nbest.offsets, dtype=np.int64), int(k))

    @staticmethod
    def scores(nbest: NBestList, name: str | None, path: str) -> np.ndarray:
        if name is None:
            name = "nmt" if "nmt" in nbest.feature_names else "total"
        if name == "total":
            if nbest.scores is None:
                raise InputError("the list has no total scores: name its log-probability column as the MBR "
                                 "score feature (score_feature)", path, option="score_feature")
            return nbest.scores
        if name not in nbest.feature_names:
            raise InputError(f"score_feature {name!r}: no such column (the list has "
                             f"{', '.join(nbest.feature_names) or 'no features'}"
                             + (" and no total scores" if nbest.scores is None else "") + ")", path,
                             option="score_feature")
        return nbest.column(name)
