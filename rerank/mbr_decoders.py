"""The approximate MBR decoders of the mbr feature, each one `MBROptions.method` beside exact and
aggregate (rerank.consensus): they estimate the same expected utility

    mbr(h_i) = sum_j p_j U(h_i, h_j)    over the pseudo-references j (p > 0) of h_i's list

from fewer utility computations, and each equals exact MBR at its limit (tests/test_mbr_decoders.py):

- `centroid` (Deguchi et al. 2024, "Centroid-based efficient minimum Bayes risk decoding"; mbrs's
  DecoderCentroidMBR): per list, k-means of the pseudo-references' embeddings into `centroids`
  clusters (k-means++ start, seeded, then Lloyd's steps; each point weighted by its posterior, so a
  centroid is its cluster's posterior-weighted mean), and mbr(h_i) = sum_k P_k U(h_i, c_k) with
  P_k the cluster's posterior mass: N x K utilities instead of N x N. With K at least the number
  of pseudo-references each is its own centroid, and the values are exact MBR's. It needs a utility
  of embeddings (`embed`, `against` and optionally `centre`: rerank.consensus.VectorUtility's
  cosine, for which a centroid counts as its direction; COMET-22's estimator on sentence
  embeddings, for which a centroid is a mean embedding).
- `probabilistic` (Trabelsi et al. 2024, "Efficient minimum Bayes risk decoding using low-rank
  matrix completion algorithms"; mbrs's DecoderProbabilisticMBR): per list, a seeded uniform
  sample of `sample_ratio` of the hypothesis x pseudo-reference entries is computed, the rest is
  filled in by a rank-`rank` factorisation fitted to those entries by alternating least squares
  (mbrs's iterations, L2 weight and stopping rule), and every entry is read from the completion,
  as in mbrs (keeping the computed entries instead favours the rows with more of them, since the
  completion shrinks towards 0). A ratio of 1 computes every entry: exact MBR, no completion.
- `pruning` (Cheng & Vlachos 2023, "Faster minimum Bayes risk decoding with confidence-based
  pruning"; mbrs's DecoderPruningMBR): the pseudo-references enter in a seeded order, drawn
  without replacement in proportion to their posterior; at each step of `pruning_schedule` the
  hypotheses still in are scored against the pseudo-references drawn so far (their posterior
  renormalised over them), and a hypothesis whose bootstrap probability of scoring at least as
  high as the current best (BOOTSTRAP_SAMPLES resamples of those pseudo-references) is at most
  1 - `pruning_alpha` is pruned, as in mbrs. Nothing is pruned after the last step (nothing is
  left to save) or once every pseudo-reference is in: a schedule whose first step holds them all
  is exact MBR; the hypotheses kept to a step that holds them all have their exact values.
- `c2f` (coarse to fine): the aggregate method ranks each list's hypotheses, and exact MBR scores
  its `c2f_k` best: with K as large as the list it is exact MBR.

A hypothesis that a decoder drops (pruned, outside c2f's top K, or no candidate) is NaN in
`decode`'s result; rerank.consensus.mbr_scores gives it its list's lowest kept value less
DROPPED_MARGIN (1e-4 points), so that the decision never falls on it, even in a tie. Every random draw comes from a generator seeded
by (`seed`, the list's index in the file), so a list's values do not depend on the blocks it is
computed in. The decision is always the maximum: a lower-is-better metric's utility is already
oriented (minus TER) by the utility."""

from __future__ import annotations

import math

import numpy as np

from rerank.errors import InputError

DECODERS = ("centroid", "probabilistic", "pruning", "c2f")
KMEANS_ITERATIONS = 5                   # Lloyd's steps at most (mbrs's Kmeans.Config.niter)
ALS_ITERATIONS = 10                     # mbrs's DecoderProbabilisticMBR: niter, regularization_weight
ALS_REGULARISATION = 0.1
ALS_TOLERANCE = 1e-4                    # mbrs's factorize: stop when the loss falls by less
BOOTSTRAP_SAMPLES = 500                 # mbrs's DecoderPruningMBR.num_bootstrap_samples
TILE = 16                               # PairScorer: hypotheses and pseudo-references per tile
TILE_COST = 8                           # tiles are taken where their pairs are 8x fewer than the lists' squares: a
                                        # tile's pair costs chrF 1.2 to 2.5 of a whole list's (150-best lists), and a
                                        # square once scored is kept for the later calls (pruning's next steps)

# the options of each decoder: refused with another method (they would change nothing)
OWNERS = {"centroids": ("centroid",), "sample_ratio": ("probabilistic",), "rank": ("probabilistic",),
          "pruning_schedule": ("pruning",), "pruning_alpha": ("pruning",), "c2f_k": ("c2f",),
          "seed": ("centroid", "probabilistic", "pruning")}


def check_method(options, name: str, cls: type) -> None:
    """Refuse, in one line, a decoder the `name` utility (class `cls`) does not allow, a decoder's
    option given with another method, and a pruning schedule that does not grow."""
    method = options.method
    defaults = type(options)()
    for field, methods in OWNERS.items():
        if method not in methods and getattr(options, field) != getattr(defaults, field):
            names = methods[0] if len(methods) == 1 else f"{', '.join(methods[:-1])} and {methods[-1]}"
            raise InputError(f"{field} is for the {names} MBR method{'s' if len(methods) > 1 else ''}, "
                             f"and the method is {method}", option=field)
    if method == "centroid" and getattr(cls, "embed", None) is None:
        kind = "scores texts, it has no embeddings" if not getattr(cls, "needs_model", True) else "has no embeddings"
        raise InputError(f"method centroid clusters the pseudo-references' embeddings; the {name} utility "
                         f"{kind}: use a utility of embeddings (comet, sim, mlmme) or another method", option="method")
    if method == "c2f" and getattr(cls, "aggregate", None) is None:
        reason = getattr(cls, "no_aggregate", "") or f"the {name} MBR utility has no aggregate method"
        raise InputError(f"method c2f ranks by the aggregate MBR method first, and {reason}", option="method")
    schedule = list(options.pruning_schedule)
    if any(b <= a for a, b in zip(schedule, schedule[1:])):
        raise InputError(f"pruning_schedule must grow step by step, got {','.join(map(str, schedule))}",
                         option="pruning_schedule")


def decode(options, utility, texts: list[str], group: np.ndarray, p: np.ndarray, candidates: np.ndarray | None,
           sources, first_list: int = 0) -> np.ndarray:
    """The expected utility (as block_scores gives it, in [0, 1] for bleu) of the rows of whole
    lists by the decoder `options.method`: texts, `group` the list of every row (from 0),
    posteriors (0 for a row that is no pseudo-reference), `candidates` the rows to score (None:
    every row), `first_list` the index in the file of the block's first list (the seeds'). NaN
    for every row not scored (no candidate, pruned, outside c2f's top K)."""
    hyps = np.ones(len(texts), dtype=bool) if candidates is None else np.asarray(candidates, dtype=bool)
    lists = Lists(group, hyps, p > 0, options.seed, first_list)
    method = options.method
    if method == "centroid":
        return centroid(utility, sources, texts, group, p, lists, options.centroids)
    scorer = PairScorer(utility, sources, texts, group)
    if method == "c2f":
        return coarse_to_fine(scorer, p, lists, options.c2f_k)
    if method == "probabilistic":
        return probabilistic(scorer, p, lists, options.sample_ratio, options.rank)
    if method == "pruning":
        return pruning(scorer, p, lists, list(options.pruning_schedule), options.pruning_alpha)
    raise ValueError(f"not a decoder of rerank.mbr_decoders: {method!r}")


class Lists:
    """The hypotheses (rows to score) and pseudo-references (rows with p > 0) of each list of a
    block, and each list's random generator."""

    def __init__(self, group: np.ndarray, hyps: np.ndarray, refs: np.ndarray, seed: int, first_list: int):
        self.n = int(group.max(initial=-1)) + 1
        self.hyps, self.refs = np.flatnonzero(hyps), np.flatnonzero(refs)
        self.hyp_group, self.ref_group = group[self.hyps], group[self.refs]
        self.hyp_bounds = np.searchsorted(self.hyp_group, np.arange(self.n + 1))
        self.ref_bounds = np.searchsorted(self.ref_group, np.arange(self.n + 1))
        self.seed, self.first = seed, first_list

    def rows(self, l: int) -> tuple[np.ndarray, np.ndarray]:
        """(hypothesis rows, pseudo-reference rows) of list l."""
        return (self.hyps[self.hyp_bounds[l]:self.hyp_bounds[l + 1]],
                self.refs[self.ref_bounds[l]:self.ref_bounds[l + 1]])

    def rng(self, l: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.first + l])


def cross_pairs(left: np.ndarray, left_group: np.ndarray, right: np.ndarray, right_group: np.ndarray,
                n_lists: int) -> tuple[np.ndarray, np.ndarray]:
    """(I, J): every pair of an item of `left` and an item of `right` of the same list (both sorted
    by list), list by list, left-major, as rerank.consensus.pair_index orders a list's pairs."""
    widths = np.bincount(right_group, minlength=n_lists)
    starts = np.concatenate([[0], np.cumsum(widths)])[:-1]
    reps = widths[left_group]
    within = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
    return np.repeat(left, reps), right[np.repeat(starts[left_group], reps) + within]


class PairScorer:
    """U(texts[i], texts[j]) of some pairs of rows of one block. A utility of embeddings (`embed`,
    where the utility object `embeds`) encodes every text once and scores the pairs from the
    embeddings; another is asked for the pairs with the rows they hold alone, or, where that is
    cheaper for a utility that scores every pair of a list (bleu and chrf count them in one
    product), in tiles of TILE x TILE (`tiles`), so that they count a few times the pairs asked,
    not every pair of the rows. Such a utility (`scores_every_pair`) is asked, where the tiles
    would cost more, for every pair of the lists the pairs touch, all of them kept for the calls
    after (pruning's later steps), so that a decoder never costs it more than exact MBR and tiles."""

    def __init__(self, utility, sources, texts: list[str], group: np.ndarray):
        from rerank.consensus import row_offsets

        self.utility, self.sources, self.texts, self.group = utility, sources, texts, group
        self.matrix = bool(getattr(utility, "holds_matrix", False))   # a utility matrix folder's (rerank.mbr_matrix)
        embeds = not self.matrix and callable(getattr(utility, "embed", None)) and getattr(utility, "embeds", True)
        self.vectors = utility.embed(sources, texts, group) if embeds else None
        self.known: np.ndarray | None = None   # every pair's value once scored, NaN before (scores_every_pair)
        if not self.matrix and self.vectors is None and getattr(utility, "scores_every_pair", False):
            self.offsets = row_offsets(group)
            self.sizes = np.diff(self.offsets)
            self.pair_offsets = np.concatenate([[0], np.cumsum(self.sizes ** 2)]).astype(np.int64)
            self.known = np.full(int(self.pair_offsets[-1]), np.nan)

    def __call__(self, I: np.ndarray, J: np.ndarray) -> np.ndarray:
        if len(I) == 0:
            return np.zeros(0)
        if self.matrix:   # the block's pairs are read from the folder: no text or embedding is scored
            return np.asarray(self.utility.exact(self.sources, self.texts, self.group, I, J), dtype=np.float64)
        if self.vectors is not None:
            return np.asarray(self.utility.against(self.sources, self.group, self.vectors, I, self.vectors, J),
                              dtype=np.float64)
        if self.known is None:
            return self.cheapest(I, J)
        at = self.position(I, J)
        missing = np.isnan(self.known[at])
        if missing.any():
            self.learn(I[missing], J[missing])
        return self.known[at]

    def position(self, I: np.ndarray, J: np.ndarray) -> np.ndarray:
        """Where the pairs (I, J) are in `known` (pair_index's layout)."""
        g = self.group[I]
        return self.pair_offsets[g] + (I - self.offsets[g]) * self.sizes[g] + (J - self.offsets[g])

    def learn(self, I: np.ndarray, J: np.ndarray) -> None:
        """Score the pairs (I, J) into `known`: in tiles, or every pair of the lists they touch where
        that costs no more."""
        lists = np.unique(self.group[I])
        if TILE_COST * self.tiles(I, J)[0] < int((self.sizes[lists] ** 2).sum()):
            self.known[self.position(I, J)] = self.cheapest(I, J)   # type: ignore[index]
            return
        rows = np.concatenate([np.arange(self.offsets[l], self.offsets[l + 1]) for l in lists.tolist()])
        every_I, every_J = cross_pairs(rows, self.group[rows], rows, self.group[rows], len(self.sizes))
        self.known[self.position(every_I, every_J)] = self.ask(every_I, every_J, rows)   # type: ignore[index]

    def cheapest(self, I: np.ndarray, J: np.ndarray) -> np.ndarray:
        """The utility's values of the pairs, asked in tiles or on the rows they hold, the cheaper."""
        rows = np.unique(np.concatenate([I, J]))
        tiles = self.tiles(I, J)
        if TILE_COST * tiles[0] < int((np.bincount(self.group[rows]) ** 2).sum()):
            _, rows, group, sources, inverse = tiles
            texts = [self.texts[r] for r in rows.tolist()]
            return np.asarray(self.utility.exact(sources, texts, group, inverse[:len(I)], inverse[len(I):]),
                              dtype=np.float64)
        return self.ask(I, J, rows)

    def ask(self, I: np.ndarray, J: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The utility's values of the pairs, asked with the `rows` (sorted, holding every I and J) alone."""
        inverse = np.searchsorted(rows, np.concatenate([I, J]))
        texts = [self.texts[r] for r in rows.tolist()]
        return np.asarray(self.utility.exact(self.sources, texts, self.group[rows], inverse[:len(I)],
                                             inverse[len(I):]), dtype=np.float64)

    def tiles(self, I: np.ndarray, J: np.ndarray):
        """The pairs cut into tiles of at most TILE of a list's hypotheses (the distinct I) by TILE
        of its pseudo-references (the distinct J), each tile a list of its own rows: (the pairs a
        utility that scores every pair of a list would score, about 4 per pair asked where the
        pairs fill their rectangle (c2f's K x N, a pruning step's hypotheses x new
        pseudo-references) instead of the square of the rows they hold; the tiles' rows, their
        tile (as `group`), one source per tile (or None), and each pair's two positions)."""
        g = self.group

        def rank(x: np.ndarray) -> np.ndarray:   # the position of x among the distinct values of its list
            distinct, back = np.unique(x, return_inverse=True)
            return (np.arange(len(distinct)) - np.searchsorted(g[distinct], g[distinct]))[back]

        n = len(self.texts)
        chunks = n // TILE + 1   # a bound on a list's chunks
        key = (g[I].astype(np.int64) * chunks + rank(I) // TILE) * chunks + rank(J) // TILE
        _, tile = np.unique(key, return_inverse=True)
        tile = tile.ravel()
        entries, position = np.unique(np.concatenate([tile, tile]) * n + np.concatenate([I, J]), return_inverse=True)
        tiles, rows = entries // n, entries % n
        cost = int((np.bincount(tiles) ** 2).sum())
        first = np.searchsorted(tiles, np.arange(int(tiles.max(initial=-1)) + 1))
        sources = None if self.sources is None else [self.sources[l] for l in g[rows[first]].tolist()]
        return cost, rows, tiles, sources, position


# ---- c2f -------------------------------------------------------------------------------------------

def coarse_to_fine(scorer: PairScorer, p, lists: Lists, k: int) -> np.ndarray:
    """The aggregate method's K best hypotheses of each list, then exact MBR among them: the same
    pairs, in the same order, as the exact method asks for those rows (so K = N is exact MBR, bit
    for bit)."""
    from rerank.consensus import row_offsets, top_rows

    texts, group = scorer.texts, scorer.group
    scored = np.zeros(len(texts), dtype=bool)
    scored[lists.hyps] = True
    coarse = np.where(scored, scorer.utility.aggregate(scorer.sources, texts, group, p), -np.inf)
    top = np.flatnonzero(top_rows(coarse, row_offsets(group), k) & scored)
    I, J = cross_pairs(top, group[top], lists.refs, lists.ref_group, lists.n)
    values = np.bincount(I, weights=p[J] * scorer(I, J), minlength=len(texts))
    out = np.full(len(texts), np.nan)
    out[top] = values[top]
    return out


# ---- centroid --------------------------------------------------------------------------------------

def squared_distances(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """|x - c|^2 of every row of X and every row of C, (len(X), len(C))."""
    return np.maximum((X * X).sum(1)[:, None] - 2.0 * X @ C.T + (C * C).sum(1)[None, :], 0.0)


def weighted_kmeans(X: np.ndarray, w: np.ndarray, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(centroids, their mass): k-means of the rows of X, row j weighted by w_j > 0: k-means++
    seeding (the first centre drawn in proportion to w, each next one to w times the squared
    distance to the nearest centre), then at most KMEANS_ITERATIONS of Lloyd's steps (assign to
    the nearest centre, move each centre to its members' weighted mean). With k at least the
    number of rows each row is its own centroid. A centroid's mass is its members' total weight;
    the centroids without members are left out (fewer distinct rows than k)."""
    n = len(X)
    if k >= n:
        return X.copy(), w.copy()
    centres = [int(rng.choice(n, p=w / w.sum()))]
    nearest = squared_distances(X, X[centres])[:, 0]
    while len(centres) < k:
        q = w * nearest
        if not q.sum() > 0:
            break   # every row sits on a centre
        centres.append(int(rng.choice(n, p=q / q.sum())))
        nearest = np.minimum(nearest, squared_distances(X, X[centres[-1:]])[:, 0])
    C = X[centres].copy()
    assign = np.full(n, -1)
    weighted = w[:, None] * X
    members = np.zeros((len(C), n))   # row c: the weights of centre c's members (a one-hot product sums them)
    rows = np.arange(n)
    for _ in range(KMEANS_ITERATIONS):
        new = (-2.0 * X @ C.T + (C * C).sum(1)[None, :]).argmin(1)   # |x|^2 is the same for every centre
        if np.array_equal(new, assign):
            break
        assign = new
        mass = np.bincount(assign, weights=w, minlength=len(C))
        members[:] = 0.0
        members[assign, rows] = 1.0
        sums = members @ weighted
        filled = mass > 0
        C[filled] = sums[filled] / mass[filled, None]
    mass = np.bincount(assign, weights=w, minlength=len(C))
    return C[mass > 0], mass[mass > 0]


def centroid(utility, sources, texts, group, p, lists: Lists, k: int) -> np.ndarray:
    """Centroid MBR: each hypothesis against the posterior-weighted k-means centroids of its
    list's pseudo-references' embeddings, weighted by their mass."""
    if not getattr(utility, "embeds", True):
        raise InputError("method centroid: " + getattr(utility, "no_embeddings", "the centroid MBR method needs a "
                                                        "utility of embeddings"), option="method")
    vectors = utility.embed(sources, texts, group)
    centres, masses, owners, clusters = [], [], [], []
    for l in range(lists.n):
        _, refs = lists.rows(l)
        if len(refs):
            C, mass = weighted_kmeans(vectors[refs], p[refs], k, lists.rng(l))
            clusters.append(k < len(refs))
            centres.append(C)
            masses.append(mass)
            owners.append(np.full(len(C), l))
    out = np.full(len(texts), np.nan)
    if not centres:
        return out
    C, mass, owner = np.concatenate(centres), np.concatenate(masses), np.concatenate(owners)
    clustered = np.repeat(np.asarray(clusters), [len(c) for c in centres])   # not each pseudo-reference its own
    if callable(getattr(utility, "centre", None)) and clustered.any():
        C[clustered] = utility.centre(C[clustered])
    I, K = cross_pairs(lists.hyps, lists.hyp_group, np.arange(len(C)), owner, lists.n)
    U = np.asarray(utility.against(sources, group, vectors, I, C, K), dtype=np.float64)
    out[lists.hyps] = np.bincount(I, weights=mass[K] * U, minlength=len(texts))[lists.hyps]
    return out


# ---- probabilistic ---------------------------------------------------------------------------------

def als_complete(M: np.ndarray, observed: np.ndarray, rank: int, rng: np.random.Generator) -> np.ndarray:
    """X Y^T, the rank-`rank` factorisation of M that
    minimises sum over observed (M - X Y^T)^2 + ALS_REGULARISATION (|X|^2 + |Y|^2), by alternating
    least squares from mbrs's scaled uniform start (each row of X, then of Y, one r x r solve)."""
    n, m = M.shape
    X = rng.random((n, rank)) * (n * rank) ** -0.5
    Y = rng.random((m, rank)) * (m * rank) ** -0.5
    mask = observed.astype(np.float64)
    target = np.where(observed, M, 0.0)
    ridge = ALS_REGULARISATION * np.eye(rank)
    previous = 1e5
    def normal(weights: np.ndarray, F: np.ndarray) -> np.ndarray:   # sum_j w_ij f_j f_j^T + ridge, row by row
        return (weights @ (F[:, :, None] * F[:, None, :]).reshape(len(F), -1)).reshape(-1, rank, rank) + ridge

    for _ in range(ALS_ITERATIONS):
        X = np.linalg.solve(normal(mask, Y), (target @ Y)[:, :, None])[:, :, 0]
        Y = np.linalg.solve(normal(mask.T, X), (target.T @ X)[:, :, None])[:, :, 0]
        loss = float(((mask * (target - X @ Y.T)) ** 2).sum() + ALS_REGULARISATION * ((X ** 2).sum() + (Y ** 2).sum()))
        if previous - loss <= ALS_TOLERANCE:
            break
        previous = loss
    return X @ Y.T


def probabilistic(scorer: PairScorer, p, lists: Lists, ratio: float, rank: int) -> np.ndarray:
    """Probabilistic MBR: per list, ceil(ratio H R) of its H x R entries drawn uniformly without
    replacement (all of them for ratio 1), computed in one utility call for the block, the
    rest completed by `als_complete`, and each row's posterior-weighted sum."""
    sampled, shapes = [], []
    for l in range(lists.n):
        hyps, refs = lists.rows(l)
        total = len(hyps) * len(refs)
        count = min(total, math.ceil(ratio * total))
        flat = np.arange(total) if count == total else np.sort(lists.rng(l).choice(total, count, replace=False))
        sampled.append(flat)
        shapes.append((hyps, refs))
    none = [np.zeros(0, dtype=np.int64)]
    I = np.concatenate([hyps[flat // max(len(refs), 1)] for flat, (hyps, refs) in zip(sampled, shapes)] + none)
    J = np.concatenate([refs[flat % max(len(refs), 1)] for flat, (hyps, refs) in zip(sampled, shapes)] + none)
    U = scorer(I, J)
    out = np.full(len(p), np.nan)
    start = 0
    for l, (flat, (hyps, refs)) in enumerate(zip(sampled, shapes)):
        if not len(hyps):
            continue
        entries = np.zeros(len(hyps) * len(refs))
        entries[flat] = U[start:start + len(flat)]
        start += len(flat)
        M = entries.reshape(len(hyps), len(refs))
        if len(flat) < M.size:
            observed = np.zeros(M.size, dtype=bool)
            observed[flat] = True
            M = als_complete(M, observed.reshape(M.shape), rank, lists.rng(l))
        out[hyps] = M @ p[refs]
    return out


# ---- pruning ---------------------------------------------------------------------------------------

def posterior_order(refs: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The pseudo-references `refs` in an order drawn without replacement in proportion to their
    posterior (Gumbel top-k: the rows by log p_j + a standard Gumbel draw, highest first)."""
    keys = np.log(p[refs]) + rng.gumbel(size=len(refs))
    return refs[np.argsort(-keys, kind="stable")]


def survivors(M: np.ndarray, w: np.ndarray, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """The rows of M (hypotheses x the pseudo-references drawn so far, weights w) to keep: those
    whose share of BOOTSTRAP_SAMPLES resamples of the columns (with replacement, each a
    renormalised weighted mean) in which they score at least the current best's is above
    1 - alpha (mbrs's rule); the current best is always kept."""
    r = M.shape[1]
    draws = rng.integers(0, r, size=(BOOTSTRAP_SAMPLES, r)) + r * np.arange(BOOTSTRAP_SAMPLES)[:, None]
    counts = np.bincount(draws.ravel(), minlength=BOOTSTRAP_SAMPLES * r).reshape(BOOTSTRAP_SAMPLES, r) * w[None, :]
    boot = (M @ counts.T) / counts.sum(1)[None, :]                                           # (H, B)
    best = int(np.argmax(M @ w))
    return (boot >= boot[best][None, :]).mean(1) > 1.0 - alpha


def pruning(scorer: PairScorer, p, lists: Lists, schedule: list[int], alpha: float) -> np.ndarray:
    """Confidence-based pruning MBR: the steps of `schedule` for every list of the block at once
    (one utility call per step), each list's hypotheses pruned by `survivors` between steps."""
    alive, order, rngs, blocks = [], [], [], []
    for l in range(lists.n):
        hyps, refs = lists.rows(l)
        rng = lists.rng(l)
        alive.append(hyps)
        order.append(posterior_order(refs, p, rng))
        rngs.append(rng)
        blocks.append(np.zeros((len(hyps), 0)))
    done = [0] * lists.n
    for step, size in enumerate(schedule):
        last = step == len(schedule) - 1
        going = [l for l in range(lists.n) if done[l] < min(size, len(order[l])) and len(alive[l])]
        if not going:
            break
        pairs = [np.meshgrid(alive[l], order[l][done[l]:min(size, len(order[l]))], indexing="ij") for l in going]
        U = scorer(np.concatenate([i.ravel() for i, _ in pairs]), np.concatenate([j.ravel() for _, j in pairs]))
        start = 0
        for l, (i, _) in zip(going, pairs):
            blocks[l] = np.hstack([blocks[l], U[start:start + i.size].reshape(i.shape)])
            start += i.size
            done[l] = blocks[l].shape[1]
            if not last and done[l] < len(order[l]):
                keep = survivors(blocks[l], p[order[l][:done[l]]], alpha, rngs[l])
                alive[l], blocks[l] = alive[l][keep], blocks[l][keep]
    out = np.full(len(p), np.nan)
    for l in range(lists.n):
        if len(alive[l]):
            w = p[order[l][:done[l]]]
            out[alive[l]] = blocks[l] @ (w / w.sum())
    return out
