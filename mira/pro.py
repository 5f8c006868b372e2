"""PRO, pairwise ranking optimisation (Hopkins & May 2011), regularised as Moses runs it.

Per sentence: sample `samples` hypothesis pairs uniformly (with replacement; a pair drawn twice
counts once), keep those whose sentence-level score differs by more than `threshold` times the
objective's scale (BLEU+1 when tuning BLEU; chrF, -TER or METEOR of the sentence alone, as a
fraction, for those metrics: scale 1, Hopkins & May's threshold; a column's values on its own
scale, the threshold a fraction of the column's spread, `TuningMetric.scale`), and of these the
`keep` pairs with the largest difference (`pick="largest"`, Hopkins & May) or the first `keep`
drawn (`pick="random"`: a uniform sample of them).

The defaults are Hopkins & May's and Moses' for every objective, columns included: on a planted
column that is an exact linear function of the features, `pick="random"` with threshold 0 finds
the column's argmax far more often (99.4-99.7% against 90-95%: a list's largest gaps are its
extreme pairs, and the close pairs that decide its best are left out), but on a real, noisy column
(sentence chrF, tuned on val, read on test) the defaults are better on all six shipped lists
(docs/tuning.md): the threshold and the largest gaps guard against the noise of a sentence score.
Sentence BLEU is Lin & Och's BLEU+1 (+1 on orders 2-4) by
default; `smoothing="moses"` takes Moses' PRO's, +1 on all four orders (docs/tuning.md). Each kept
pair gives two examples (f_j - f_j', +1) and (f_j' - f_j, -1) for a binary logistic regression
without intercept (scikit-learn); its coefficients are the weights. Sampling runs over blocks of
sentences at once (numpy), not pair by pair.

The fit minimises, over all 2P examples (x_e, y_e) of the P kept pairs of the whole tuning set,

    sum_e log(1 + exp(-y_e w.x_e)) + |w|^2 / (2 C)

i.e. the L2 term is added once, not per pair or per sentence: more pairs weaken it. This is the
objective of Moses' PRO (mert-moses.pl writes the 2P examples with `pro` and fits them with
`megam -fvals -maxi 30 -nobias binary`, MegaM's maximum a-posteriori logistic regression with a
Gaussian prior of precision lambda = 1, the MegaM default: sum_e loss + lambda |w|^2 / 2), so
C = 1 / lambda and the default C = 1 is Moses'. scikit-learn's `LogisticRegression(C)` minimises
C sum_e loss + |w|^2 / 2, the same minimiser. Unlike MegaM (30 L-BFGS iterations at most) the
fit here runs to convergence.

Fixed features enter as one extra column w_fix . (f_j - f_j'); the tuned coefficients are then
divided by that column's coefficient, so the fixed part keeps its weight (ranking is invariant
to the common scale).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from rerank.tuning import TuningData
from rerank.errors import InputError, needs_neural

log = logging.getLogger(__name__)


SMOOTHINGS = ("lin-och", "moses")   # sentence BLEU of the pairs: BLEU+1, or Moses' smoothedSentenceBleu(stats, 1)


def moses_sentence_bleu(stats: np.ndarray) -> np.ndarray:
    """Sentence BLEU as Moses' PRO computes it, `smoothedSentenceBleu(stats, 1)`: 1 added to the
    matches and counts of all four orders, unigrams included; the brevity term 1 - ref / hyp from
    the unsmoothed lengths, added to the log when negative (no smoothing of the reference length,
    Moses' smoothBP = false). Rows of sacrebleu-layout statistics (n, 10) -> (n,)."""
    from rerank.metrics.bleu import CORRECT, REF_LEN, TOTAL

    stats = np.asarray(stats, dtype=np.float64)
    correct, total = stats[..., CORRECT] + 1.0, stats[..., TOTAL] + 1.0
    log_bleu = (np.log(correct) - np.log(total)).mean(axis=-1)
    hyp_len, ref_len = stats[..., TOTAL][..., 0], stats[..., REF_LEN]
    with np.errstate(divide="ignore", invalid="ignore"):
        brevity = 1.0 - ref_len / hyp_len   # an empty hypothesis: -inf (score 0), or NaN with an empty reference
    log_bleu = np.where(brevity < 0.0, log_bleu + brevity, log_bleu)
    return np.exp(log_bleu)


@dataclass
class ProResult:
    weights: np.ndarray
    initial_score: float
    best_score: float
    n_pairs: int


PICKS = ("largest", "random")   # which of a sentence's pairs above the threshold are kept


def sample_pairs(sbleu: np.ndarray, offsets: np.ndarray, rng: np.random.Generator, samples: int = 5000,
                 keep: int = 50, threshold: float = 0.05, block: int = 256,
                 pick: str = "largest") -> tuple[np.ndarray, np.ndarray]:
    """Rows (j, j') of the kept pairs, ordered sentence by sentence (the largest gaps first, or in
    the order drawn); |sbleu[j] - sbleu[j']| > threshold (and so != 0).

    Each sentence draws `samples` ordered pairs uniformly with replacement (Moses' PRO), and a pair
    drawn more than once counts once (either order: both give the same two examples): from a
    20-best list 5000 draws cover its 190 pairs about 25 times each, and the `keep` largest gaps
    would otherwise be two or three pairs repeated; Moses' lists, pooled over its iterations, are
    long enough that repeats are rare. Of the distinct pairs whose gap exceeds `threshold` the
    `keep` largest are kept (ties: the earlier draw), or with `pick="random"` the first `keep`
    drawn, a uniform sample of them."""
    if pick not in PICKS:
        raise ValueError(f"pick {pick!r}: not one of {', '.join(PICKS)}")
    sizes = np.diff(offsets)
    firsts, seconds = [], []
    for lo in range(0, len(sizes), block):
        k = sizes[lo:lo + block].astype(np.int64)
        start = offsets[lo:lo + len(k)]
        u = rng.random((len(k), samples, 2))
        local = np.minimum((u * k[:, None, None]).astype(np.int64), k[:, None, None] - 1)
        j = start[:, None, None] + local
        gap = np.abs(sbleu[j[..., 0]] - sbleu[j[..., 1]])
        # one key per unordered pair; after a stable sort by key, every repeat follows its first draw
        key = local.min(axis=2) * k[:, None] + local.max(axis=2)
        order = np.argsort(key, axis=1, kind="stable")
        ordered = np.take_along_axis(key, order, axis=1)
        repeat = np.zeros(key.shape, dtype=bool)
        np.put_along_axis(repeat, order[:, 1:], ordered[:, 1:] == ordered[:, :-1], axis=1)
        gap = np.where((gap > threshold) & ~repeat, gap, -1.0)
        if pick == "largest":  # the keep largest gaps, ties to the earlier draw (a stable sort of the negated gaps)
            top = np.argsort(-gap, axis=1, kind="stable")[:, :keep]
        else:                  # the first keep draws that pass (the passing ones first, in the order drawn)
            top = np.argsort(gap <= 0, axis=1, kind="stable")[:, :keep]
        chosen = np.take_along_axis(j, top[..., None], axis=1)
        ok = np.take_along_axis(gap, top, axis=1) > 0
        firsts.append(chosen[..., 0][ok])
        seconds.append(chosen[..., 1][ok])
    return np.concatenate(firsts), np.concatenate(seconds)


def pro(data: TuningData, w0: np.ndarray | None = None, *, seed: int = 1, samples: int = 5000, keep: int = 50,
        threshold: float = 0.05, C: float = 1.0, max_iter: int = 1000, smoothing: str = "lin-och",
        pick: str = "largest") -> ProResult:
    """Fit PRO weights on the whole tuning set; C as in the module doc (1 / MegaM lambda). Pairs are
    sampled by sentence-level score: BLEU+1 for BLEU (`smoothing="moses"`: Moses' +1 on all four
    orders, `moses_sentence_bleu`), the metric on one sentence otherwise; `pick` as `sample_pairs`."""
    n_feats = len(data.feature_names)
    w_init = np.zeros(n_feats) if w0 is None else np.array(w0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    if smoothing not in SMOOTHINGS:
        raise InputError(f"PRO smoothing {smoothing!r}: not one of {', '.join(SMOOTHINGS)}")
    if smoothing == "moses":
        if data.metric.sentence is not None or not getattr(data.metric.scorer, "bleu_statistics", False):
            raise InputError(f"PRO smoothing moses is a sentence BLEU: it needs the metric bleu (metric), not "
                             f"{data.metric.display}", option="metric")
        sbleu = moses_sentence_bleu(data.stats)
    else:
        sbleu = data.sentence_objectives()  # higher is better (-TER for TER): j beats j' when sbleu[j] > sbleu[j']
    gap = threshold * data.metric.scale  # on the objective's own scale (TuningMetric.scale; 1 for a metric)
    j1, j2 = sample_pairs(sbleu, data.offsets, rng, samples, keep, gap, pick=pick)
    if len(j1) == 0:
        scaled = "" if data.metric.scale == 1.0 else f" ({threshold:g} x the objective's scale {data.metric.scale:g})"
        raise InputError(f"PRO found no hypothesis pair whose sentence-level {data.metric.display} differs by more "
                         f"than {gap:g}{scaled}")
    tuned = data.tuned
    diff = data.features[j1] - data.features[j2]
    cols = [diff[:, tuned]]
    fixed_part = diff[:, ~tuned] @ w_init[~tuned] if (~tuned).any() else None
    use_fixed = fixed_part is not None and np.any(fixed_part != 0)
    if use_fixed and fixed_part is not None:  # (use_fixed implies it)
        cols.append(fixed_part[:, None])
    Xp = np.hstack(cols)
    y = (sbleu[j1] > sbleu[j2]).astype(np.int64)
    Xp, y = np.vstack([Xp, -Xp]), np.concatenate([y, 1 - y])
    with needs_neural("the PRO tuner"):  # scikit-learn: the `neural` extra
        from sklearn.linear_model import LogisticRegression
    model = LogisticRegression(C=C, fit_intercept=False, max_iter=max_iter, tol=1e-8)  # converged, see the doc
    model.fit(Xp, y)
    coef = model.coef_[0]
    w = w_init.copy()
    if use_fixed:
        scale = coef[-1]
        if scale > 0:
            w[tuned] = coef[:-1] / scale
        else:
            log.warning("warning: PRO: the fixed features got a non-positive coefficient; their weights are kept "
                        "and the tuned coefficients used as they are")
            w[tuned] = coef[:-1]
    else:
        w[tuned] = coef
    return ProResult(w, data.evaluate(w_init), data.evaluate(w), len(j1))
