"""MERT (Och 2003): exact line search over the upper envelope of every sentence's lines.

Along a direction d from w, hypothesis j scores a_j + g b_j (a = X w, b = X d). The model's
choice for a sentence changes only where the upper envelope of its lines has a breakpoint, so
the corpus metric along the line is piecewise constant: collect all breakpoints, sort them, add
up the statistics differences and score every interval at once. The envelopes of all sentences
are built together, one "next breakpoint" step per iteration over the whole list (numpy), so
the cost is O(hypotheses x envelope size). Works for any metric given as per-hypothesis
sufficient statistics plus a vectorised score of summed statistics (BLEU, TER, chrF, METEOR).

The optimiser follows Moses `mert`: from the start point and from random restarts, repeatedly
line-search along every tuned coordinate and some random directions, move along the best one,
and stop when no direction improves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rerank.tuning import TuningData
from rerank.progress import Progress, track
from rerank.nbest import segment_argmax


@dataclass
class LineSearch:
    gamma: float          # step to take (0 = stay)
    objective: float      # objective (higher is better: -TER) at w + gamma d
    breakpoints: np.ndarray   # sorted distinct breakpoints of the corpus objective
    interval_objectives: np.ndarray   # objective of each of the len(breakpoints) + 1 intervals


def envelope_breakpoints(a: np.ndarray, b: np.ndarray, offsets: np.ndarray):
    """Upper envelopes of the lines a + g b of every sentence.

    Returns (first, gammas, sentences, old, new): `first[i]` is sentence i's best row as
    g -> -inf; at g = gammas[k] sentence sentences[k] switches from row old[k] to new[k].
    Ties: lowest slope then highest intercept then first row at -inf; at a breakpoint the
    steepest line wins. Each step works only on the sentences whose envelope goes on.
    """
    n_sent = len(offsets) - 1
    sizes = np.diff(offsets)
    sid = np.repeat(np.arange(n_sent), sizes)
    neg_inf = np.full(len(a), -np.inf)
    # first line: lowest slope, then highest intercept, then first row
    low = b == np.repeat(np.minimum.reduceat(b, offsets[:-1]), sizes)
    cur = segment_argmax(np.where(low, a, neg_inf), offsets)
    first = cur.copy()
    gcur = np.full(n_sent, -np.inf)
    # working set: rows of the sentences still active, with local CSR offsets
    rows, loc_sid, loc_off, sents = np.arange(len(a)), sid, offsets, np.arange(n_sent)
    out_g, out_s, out_old, out_new = [], [], [], []
    while len(sents):
        ar, br = a[rows], b[rows]
        bc, ac, gc = b[cur][loc_sid], a[cur][loc_sid], gcur[loc_sid]
        cand = br > bc
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.where(cand, np.maximum((ac - ar) / (br - bc), gc), np.inf)
        gmin = np.minimum.reduceat(g, loc_off[:-1])
        has = np.isfinite(gmin)
        if not has.any():
            break
        steep = np.where(cand & (g == gmin[loc_sid]), br, neg_inf[:len(rows)])
        nxt = rows[segment_argmax(steep, loc_off)]
        idx = np.flatnonzero(has)
        out_g.append(gmin[idx])
        out_s.append(sents[idx])
        out_old.append(cur[idx])
        out_new.append(nxt[idx])
        # keep only the sentences that moved (their envelope may go on)
        keep_rows = has[loc_sid]
        rows = rows[keep_rows]
        kept_sizes = np.diff(loc_off)[idx]
        loc_off = np.r_[0, np.cumsum(kept_sizes)]
        loc_sid = np.repeat(np.arange(len(idx)), kept_sizes)
        cur, gcur, sents = nxt[idx], gmin[idx], sents[idx]
    if out_g:
        return first, np.concatenate(out_g), np.concatenate(out_s), np.concatenate(out_old), np.concatenate(out_new)
    empty = np.zeros(0, dtype=np.int64)
    return first, np.zeros(0), empty, empty, empty


def line_search_ab(a: np.ndarray, b: np.ndarray, stats: np.ndarray, offsets: np.ndarray, score: Callable,
                   current: float | None = None) -> LineSearch:
    """Exact best step along d from w by the objective `score` (higher is better: a TuningMetric's
    `objective`), given the model scores a = X w and their slopes b = X d; moves only if the best
    interval beats `current` (the objective at w)."""
    first, gam, _, old, new = envelope_breakpoints(a, b, offsets)
    base = stats[first].sum(axis=0)
    if current is None:
        current = float(score(stats[segment_argmax(a, offsets)].sum(axis=0)))
    if len(gam) == 0:
        return LineSearch(0.0, current, gam, np.array([float(score(base))]))
    order = np.argsort(gam, kind="stable")
    gam, old, new = gam[order], old[order], new[order]
    cum = base + np.cumsum(stats[new] - stats[old], axis=0)
    last = np.r_[gam[1:] != gam[:-1], True]
    edges = gam[last]
    interval_stats = np.vstack([base[None, :], cum[last]])
    scores = np.asarray(score(interval_stats), dtype=np.float64)
    best = int(np.argmax(scores))
    if not scores[best] > current + 1e-9:
        return LineSearch(0.0, current, edges, scores)
    if best == 0:
        gamma = edges[0] - max(1.0, abs(edges[0])) * 0.5
    elif best == len(edges):
        gamma = edges[-1] + max(1.0, abs(edges[-1])) * 0.5
    else:
        gamma = 0.5 * (edges[best - 1] + edges[best])
    return LineSearch(float(gamma), float(scores[best]), edges, scores)


@dataclass
class MertResult:
    weights: np.ndarray
    initial_score: float    # the metric's own value (TER, not -TER)
    best_score: float       # ... at the returned weights
    history: list[dict] = field(default_factory=list)  # per iteration: restart, iteration, score


def mert(data: TuningData, w0: np.ndarray | None = None, *, seed: int = 1, restarts: int = 20,
         random_directions: int = 10, max_iterations: int = 100, progress: Progress = False,
         on_iteration: Callable[[dict], None] | None = None) -> MertResult:
    """Coordinate + random-direction MERT with random restarts; returns the best point found."""
    n_feats = len(data.feature_names)
    w_init = np.zeros(n_feats) if w0 is None else np.array(w0, dtype=np.float64)
    tuned = np.flatnonzero(data.tuned)
    rng = np.random.default_rng(seed)
    X, S, offsets, objective = data.features, data.stats, data.offsets, data.metric.objective  # higher is better
    evaluate = lambda w: float(objective(S[segment_argmax(X @ w, offsets)].sum(axis=0)))  # noqa: E731
    initial = evaluate(w_init)
    best_w, best = w_init.copy(), initial
    history = []
    basis = np.eye(n_feats)[tuned]
    for restart in track(range(restarts), progress, "MERT restarts", unit="start"):
        w = w_init.copy()
        if restart > 0:
            w[tuned] = rng.uniform(-1.0, 1.0, len(tuned))
        current = evaluate(w)
        for iteration in range(1, max_iterations + 1):
            directions = basis
            if random_directions:
                rand = np.zeros((random_directions, n_feats))
                rand[:, tuned] = rng.standard_normal((random_directions, len(tuned)))
                rand /= np.linalg.norm(rand, axis=1, keepdims=True)
                directions = np.vstack([basis, rand])
            step = None
            a, B = X @ w, X @ directions.T
            for k, d in enumerate(directions):
                ls = line_search_ab(a, np.ascontiguousarray(B[:, k]), S, offsets, objective, current)
                if ls.gamma != 0.0 and (step is None or ls.objective > step[0]):
                    step = (ls.objective, ls.gamma, d)
            if step is None:
                break
            w = w + step[1] * step[2]
            current = evaluate(w)
            record = {"restart": restart + 1, "iteration": iteration, "score": data.metric.value_of(current)}
            history.append(record)
            if on_iteration is not None:
                on_iteration(record)
        if current > best:  # objectives: higher is better whatever the metric's direction
            best, best_w = current, w.copy()
    return MertResult(best_w, data.evaluate(w_init), data.evaluate(best_w), history)
