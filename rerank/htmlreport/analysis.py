"""The numbers of the HTML report, computed from the statistics `rerank.evaluation.evaluate_systems`
keeps (no metric re-reads text) and from the texts themselves:

- `length_buckets`: each metric's corpus score of every system on the sentences of each
  reference-length bucket (compare-mt's sentence buckets), and the improvement over the baseline;
- `word_buckets`: word F-measure by the frequency of the word (compare-mt's word accuracy by
  frequency bucket): bag-of-words matches of each output against each reference;
- `sentence_scores` / `changed_sentences`: sentence-level scores and the sentences whose output
  differs from the baseline's, sorted by gain;
- `oracle_curve`: the oracle score (BLEU by default, or any metric of `rerank oracle`) of the
  top-k hypotheses of n-best lists for k = 1..N.

Systems with R runs: bucket scores and F-measures are the mean over runs (a one-run system stands
for every run); sentence examples use the first run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rerank.metrics.registry import metric_info
from rerank.metrics.registry import quality_in

LENGTH_EDGES = (10, 20, 30, 40, 50)
FREQ_EDGES = (1, 2, 3, 4, 5, 10, 100, 1000)
WORD_F = "word F1"


def bucket_labels(edges: Sequence[int]) -> list[str]:
    """compare-mt's bucket names: `<e0`, then `v` for a bucket holding one integer, else `[a,b)`,
    and `>=e_last`."""
    labels = [f"<{edges[0]}"]
    for lo, hi in zip(edges, edges[1:]):
        labels.append(str(lo) if hi == lo + 1 else f"[{lo},{hi})")
    return labels + [f">={edges[-1]}"]


def bucket_of(values, edges: Sequence[int]) -> np.ndarray:
    """Bucket index of each value: 0 below edges[0], i for edges[i-1] <= v < edges[i], len(edges) above."""
    return np.searchsorted(np.asarray(edges, dtype=np.float64), np.asarray(values, dtype=np.float64), side="right")


@dataclass
class Buckets:
    """Scores per bucket: scores[metric][system][b] (None for an empty bucket) and the improvement
    over the baseline deltas[metric][system][b] (TER: baseline - system)."""

    title: str
    labels: list
    counts: list  # sentences (length buckets) or reference words (frequency buckets)
    count_name: str
    scores: dict = field(default_factory=dict)
    deltas: dict = field(default_factory=dict)


def drop_empty(buckets: Buckets) -> Buckets:
    """The buckets without those that hold nothing (no count and no score of any system)."""
    keep = [b for b in range(len(buckets.labels)) if buckets.counts[b] or any(
        v[b] is not None for scores in buckets.scores.values() for v in scores.values())]

    def pick(table: dict) -> dict:
        return {m: {s: [v[b] for b in keep] for s, v in per.items()} for m, per in table.items()}

    return Buckets(buckets.title, [buckets.labels[b] for b in keep], [buckets.counts[b] for b in keep],
                   buckets.count_name, pick(buckets.scores), pick(buckets.deltas))


def direction_sign(direction) -> float:
    """+1.0 or -1.0 of a metric's direction: `direction` is a bool (higher is better?) or a metric
    as rerank.metrics.registry takes it (a name, a MetricInfo, a Metric)."""
    if isinstance(direction, (bool, np.bool_)):
        return 1.0 if direction else -1.0
    return metric_info(direction).sign


def _deltas(scores: dict, baseline: str, direction) -> dict:
    """Improvements over the baseline per bucket, in the metric's direction (TER: baseline - system)."""
    sign = direction_sign(direction)
    base = scores[baseline]
    return {s: [None if a is None or b is None else sign * (a - b) for a, b in zip(values, base)]
            for s, values in scores.items() if s != baseline}


def reference_lengths(refs: Sequence[Sequence[str]], tokenizer: Callable[[str], str]) -> np.ndarray:
    """Mean number of tokens of each sentence's references."""
    counts = np.array([[len(tokenizer(line).split()) for line in stream] for stream in refs], dtype=np.float64)
    return counts.mean(axis=0)


def length_buckets(table, refs, tokenizer: Callable[[str], str], edges: Sequence[int] = LENGTH_EDGES) -> Buckets:
    """Every quality metric's corpus score per reference-length bucket, from the table's statistics."""
    ids = bucket_of(reference_lengths(refs, tokenizer), edges)
    nb = len(edges) + 1
    out = Buckets("reference length (tokens, mean over references)", bucket_labels(edges),
                  [int(np.sum(ids == b)) for b in range(nb)], "sentences")
    for m in table.metrics:
        if not quality_in(table, m):
            continue
        metric = table.metric_objects[m]
        scores = {}
        for s in table.systems:
            stats = np.asarray(table.stats[(s, m)], dtype=np.float64)
            sums = np.stack([stats[:, ids == b].sum(axis=1) for b in range(nb)])  # (buckets, R, k)
            values = np.asarray(metric.score_from_stats(sums), dtype=np.float64).reshape(nb, -1).mean(axis=1)
            scores[s] = [float(v) if out.counts[b] else None for b, v in enumerate(values)]
        out.scores[m] = scores
        out.deltas[m] = _deltas(scores, table.baseline, metric)
    return out


def word_counts(lines: Sequence[str], tokenizer: Callable[[str], str], lowercase: bool = False) -> Counter:
    counts: Counter = Counter()
    for line in lines:
        counts.update(_words(line, tokenizer, lowercase))
    return counts


def _words(line: str, tokenizer: Callable[[str], str], lowercase: bool) -> list[str]:
    text = tokenizer(line)
    return (text.lower() if lowercase else text).split()


def word_matches(hyps: Sequence[str], refs: Sequence[Sequence[str]], bucket: Callable[[str], int], n_buckets: int,
                 tokenizer: Callable[[str], str], lowercase: bool = False) -> np.ndarray:
    """(buckets, 3) counts [matched, reference words, output words] of one output, every word in the
    bucket of its frequency. Each reference is compared on its own (a word matches at most as often
    as it occurs in both) and the counts are summed over the references."""
    counts = np.zeros((n_buckets, 3), dtype=np.int64)
    for stream in refs:
        for hyp, ref in zip(hyps, stream):
            out_c = Counter(_words(hyp, tokenizer, lowercase))
            ref_c = Counter(_words(ref, tokenizer, lowercase))
            for w in out_c.keys() | ref_c.keys():
                b = bucket(w)
                counts[b, 0] += min(out_c[w], ref_c[w])
                counts[b, 1] += ref_c[w]
                counts[b, 2] += out_c[w]
    return counts


def f_measure(counts: np.ndarray) -> np.ndarray:
    """100 x F1 of precision matched/output and recall matched/reference per bucket (0 without matches)."""
    both, ref, out = (counts[..., i].astype(np.float64) for i in range(3))
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(both > 0, 2 * both / np.where(ref + out > 0, ref + out, 1.0), 0.0)
    return 100.0 * f


def word_buckets(outputs: dict, baseline: str, refs, tokenizer: Callable[[str], str], frequencies: Counter,
                 lowercase: bool = False, edges: Sequence[int] = FREQ_EDGES, source: str = "the references") -> Buckets:
    """Word F-measure of every system (mean over its runs) per frequency bucket of the words."""
    nb = len(edges) + 1
    cache: dict[str, int] = {}

    def bucket(word: str) -> int:
        b = cache.get(word)
        if b is None:
            b = cache[word] = int(bucket_of([frequencies.get(word, 0)], edges)[0])
        return b

    scores, ref_words = {}, np.zeros(nb)
    for name, runs in outputs.items():
        per_run = [word_matches(h, refs, bucket, nb, tokenizer, lowercase) for h in runs]
        ref_words = per_run[0][:, 1]
        scores[name] = [float(v) for v in np.mean([f_measure(c) for c in per_run], axis=0)]
    out = Buckets(f"frequency of the word in {source}", bucket_labels(edges), [int(c) for c in ref_words],
                  "reference words" + (f" (all {len(refs)} references)" if len(refs) > 1 else ""))
    out.scores[WORD_F] = {s: [v if out.counts[b] or v else None for b, v in enumerate(vals)] for s, vals in scores.items()}
    out.deltas[WORD_F] = _deltas(out.scores[WORD_F], baseline, True)
    return out


def sentence_scores(metric, stats: np.ndarray) -> np.ndarray:
    """Each sentence's own score (n,) from its statistics (n, k), oriented as the metric (TER stays
    TER), on its corpus scale: the Metric's `sentence_scores` (BLEU+1 x 100 for BLEU, since plain
    BLEU is 0 for most single sentences; else the metric of the sentence alone)."""
    stats = np.asarray(stats, dtype=np.float64)
    return np.asarray(metric.sentence_scores(stats), dtype=np.float64).reshape(len(stats))


@dataclass
class Changes:
    """Sentences whose output differs from the baseline's: better (largest gain first), worse
    (largest loss first), changed with an equal score; gains per sentence (all sentences)."""

    better: list
    worse: list
    tied: int
    gains: np.ndarray


def changed_sentences(baseline: Sequence[str], system: Sequence[str], base_scores, sys_scores,
                      higher_is_better=True) -> Changes:
    """`higher_is_better`: the metric's direction, a bool or a metric (see `direction_sign`); gains
    are improvements in that direction (TER: baseline - system), so "better" means a lower TER."""
    sign = direction_sign(higher_is_better)
    gains = sign * (np.asarray(sys_scores, dtype=np.float64) - np.asarray(base_scores, dtype=np.float64))
    changed = np.array([a != b for a, b in zip(baseline, system)], dtype=bool)
    idx = np.flatnonzero(changed)
    order = idx[np.argsort(-gains[idx], kind="stable")]
    better = [int(i) for i in order if gains[i] > 1e-9]
    worse = [int(i) for i in order[::-1] if gains[i] < -1e-9]
    return Changes(better, worse, int(len(idx) - len(better) - len(worse)), gains)


def oracle_curve(nbest, refs, model_scores=None, tokenize: str = "13a", lowercase: bool = False, *,
                 metric: str = "bleu", lower_better: bool = False, **options) -> tuple[list, list]:
    """(k, corpus score) for k = 1..N: each sentence's best hypothesis by the sentence-level score of
    `metric` (as `rerank oracle` picks: BLEU+1 for BLEU, the metric of the sentence alone for chrF,
    TER, METEOR, a column's value; `lower_better` for a column) among its top k under `model_scores`
    (higher first; None: the list's own order), ties to the higher-ranked one, and the metric's corpus
    score of those picks. `options`: `rerank.oracles.oracle_scores`' (scorer, lang, ter_case_sensitive,
    meteor_options)."""
    from rerank.oracles import oracle_scores

    scores = oracle_scores(nbest, refs, metric, tokenize=tokenize, lowercase=lowercase, lower_better=lower_better,
                           **options)
    return top_k_curve(scores, nbest.offsets, model_scores)


def top_k_curve(scores, offsets, model_scores=None) -> tuple[list, list]:
    """(k, corpus score) for k = 1..N of `rerank.oracles.OracleScores`: each sentence's best hypothesis
    by `scores.gain` among its top k under `model_scores` (higher first; None: the list's own order),
    ties to the higher-ranked one, and `scores.corpus` of those picks. Sentences without hypotheses
    are left out."""
    offsets = np.asarray(offsets)
    gain = scores.gain
    k_max = int(np.max(np.diff(offsets)))
    filled = [(lo, hi) for lo, hi in zip(offsets[:-1].tolist(), offsets[1:].tolist()) if hi > lo]
    picks = np.zeros((k_max, len(filled)), dtype=np.int64)
    for i, (lo, hi) in enumerate(filled):
        rows = np.arange(lo, hi)
        if model_scores is not None:
            rows = rows[np.argsort(-np.asarray(model_scores[lo:hi], dtype=np.float64), kind="stable")]
        best = 0
        for j in range(k_max):
            if j < len(rows) and gain[rows[j]] > gain[rows[best]]:
                best = j
            picks[j, i] = rows[best]
    ks = list(range(1, k_max + 1))
    return ks, [scores.corpus(picks[k - 1]) for k in ks]
