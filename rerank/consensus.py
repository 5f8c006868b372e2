"""Minimum-Bayes-risk (consensus) features: the expected utility of each hypothesis against
the hypotheses of its own list as pseudo-references, weighted by the model's posterior.

    mbr(h_i) = 100 sum_j p_j U(h_i, h_j),   p = softmax(score / T) within the list

in percent, like the metrics' scores: a feature on the scale of the others lets k-best MIRA
(whose steps are capped at C) reach a useful weight (on the shipped optimised 20-best lists,
the same feature in [0, 1] gained nothing over the NMT features; in percent, +0.34 BLEU).

The sum includes j = i, as standard MBR decoding does (mbrs, Kumar & Byrne 2004): as T -> 0
the feature ranks the model's 1-best first (MAP), as T grows it becomes pure consensus.

U is sentence BLEU+1 (Lin & Och 2004; the toolkit's sentence-level BLEU, rerank.bleu),
sentence chrF (sacrebleu's formula, rerank.metrics), or minus sentence TER (sacrebleu): each
pair's metric value oriented by the metric registry (rerank.metrics.registry.objective), so a
lower-is-better metric counts as a loss and the feature is always higher-is-better. For
BLEU and chrF every pair of a list is scored at once: n-grams get integer ids per sentence,
clipped matches min(c_i, c_j) = sum_t [c_i >= t][c_j >= t] come from sparse products of the
count-threshold indicator matrices (block-diagonal by sentence), and the formulas run over all
pairs as numpy arrays. TER needs an edit distance with shifts per pair (sacrebleu, cached on
distinct string pairs) and is much slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.bleu import sentence_bleu_plus1
from rerank.cliargs import positive_float
from rerank.errors import InputError
from rerank.features import Feature, FeatureContext, make_options
from rerank.metrics.registry import objective
from rerank.nbest import NBestList

UTILITIES = ("bleu", "chrf", "ter")
CHRF_CHAR_ORDER, CHRF_BETA = 6, 2.0


def pair_index(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(I, J, pair_offsets): every ordered pair (i, j) of rows of one list, list by list, i-major."""
    sizes = np.diff(offsets)
    pair_offsets = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
    sentence = np.repeat(np.arange(len(sizes)), sizes ** 2)
    local = np.arange(pair_offsets[-1]) - pair_offsets[sentence]
    k = sizes[sentence]
    return offsets[sentence] + local // np.maximum(k, 1), offsets[sentence] + local % np.maximum(k, 1), pair_offsets


def integer_sequences(texts: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, bounds): all units of all texts as one int64 array, text t at ids[bounds[t]:bounds[t+1]]."""
    vocab: dict[str, int] = {}
    ids = [vocab.setdefault(unit, len(vocab)) for text in texts for unit in text]
    bounds = np.concatenate([[0], np.cumsum([len(t) for t in texts])]).astype(np.int64)
    return np.asarray(ids, dtype=np.int64), bounds


def ngram_ids(ids: np.ndarray, bounds: np.ndarray, group: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(text, ngram): one entry per n-gram occurrence; n-gram ids are shared only within a group."""
    lengths = np.diff(bounds)
    count = np.maximum(lengths - n + 1, 0)
    text = np.repeat(np.arange(len(lengths)), count)
    start = bounds[text] + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    code = ids[start]
    for k in range(1, n):  # fold the next unit into a dense code: stays far below 2^63
        _, code = np.unique(code, return_inverse=True)
        code = code.astype(np.int64) * (int(ids.max(initial=0)) + 1) + ids[start + k]
    _, code = np.unique(code, return_inverse=True)
    _, ngram = np.unique(code.astype(np.int64) * (int(group.max(initial=0)) + 1) + group[text], return_inverse=True)
    return text, ngram.astype(np.int64)


def pair_matches(ids, bounds, group, n, I, pair_offsets, offsets) -> tuple[np.ndarray, np.ndarray]:
    """(clipped n-gram matches of every pair (P,), n-gram count of every text (T,))."""
    from scipy import sparse  # here, not at the top: every command's start-up loads this plug-in

    text, ngram = ngram_ids(ids, bounds, group, n)
    n_texts = len(bounds) - 1
    totals = np.bincount(text, minlength=n_texts).astype(np.float64)
    matches = np.zeros(len(I))
    if len(text) == 0:
        return matches, totals
    n_ngrams = int(ngram.max()) + 1
    keys, counts = np.unique(text * n_ngrams + ngram, return_counts=True)
    rows, cols = keys // n_ngrams, keys % n_ngrams
    for t in range(1, int(counts.max()) + 1):
        keep = counts >= t
        A = sparse.csr_matrix((np.ones(int(keep.sum())), (rows[keep], cols[keep])), shape=(n_texts, n_ngrams))
        product = (A @ A.T).tocoo()
        sentence = group[product.row]
        k = offsets[sentence + 1] - offsets[sentence]
        position = pair_offsets[sentence] + (product.row - offsets[sentence]) * k + (product.col - offsets[sentence])
        matches[position] += product.data
    return matches, totals


def bleu_utility(tokens: Sequence[Sequence[str]], nbest: NBestList, I, J, pair_offsets) -> np.ndarray:
    """Sentence BLEU+1 of every hypothesis against every hypothesis of its list, (P,)."""
    ids, bounds = integer_sequences(tokens)
    group = nbest.sentence_of_hyp
    stats = np.zeros((len(I), 10))
    lengths = np.diff(bounds).astype(np.float64)
    stats[:, 0], stats[:, 1] = lengths[I], lengths[J]  # sacrebleu layout: sys_len, ref_len, correct 1-4, total 1-4
    for n in range(1, 5):
        matches, totals = pair_matches(ids, bounds, group, n, I, pair_offsets, nbest.offsets)
        stats[:, 1 + n], stats[:, 5 + n] = matches, totals[I]
    return sentence_bleu_plus1(stats)


def chrf_utility(texts: Sequence[str], nbest: NBestList, I, J, pair_offsets, word_order: int = 0) -> np.ndarray:
    """Sentence chrF (sacrebleu's formula: character 1-6-grams without whitespace), in [0, 1]."""
    from rerank.metrics.sacre import CHRFMetric

    metric = CHRFMetric(word_order=word_order)
    group = nbest.sentence_of_hyp
    columns = []
    units = [[c for c in t if not c.isspace()] for t in texts], [t.split() for t in texts]
    for seqs, orders in ((units[0], CHRF_CHAR_ORDER), (units[1], word_order)):
        ids, bounds = integer_sequences(seqs)
        for n in range(1, orders + 1):
            matches, totals = pair_matches(ids, bounds, group, n, I, pair_offsets, nbest.offsets)
            columns += [totals[I], totals[J], matches]
    return np.asarray(metric.score_from_stats(np.stack(columns, axis=1))) / 100.0


def ter_values(texts: Sequence[str], I, J) -> np.ndarray:
    """Sentence TER (sacrebleu, with shifts) of every pair as a fraction, the metric's own value
    (lower is better), cached on distinct string pairs."""
    from sacrebleu.metrics import TER

    ter, cache, out = TER(), {}, np.zeros(len(I))
    for p, (i, j) in enumerate(zip(I.tolist(), J.tolist())):
        key = (texts[i], texts[j])
        if key not in cache:
            cache[key] = ter.sentence_score(texts[i], [texts[j]]).score / 100.0
        out[p] = cache[key]
    return out


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


SEPARATOR = "\x01"  # a token of its own under 13a: no rule of the tokeniser touches it


def tokenize_many(texts: Sequence[str], tokenize: str = "13a", chunk: int = 2000) -> list[list[str]]:
    """sacrebleu's tokens of every text (as BLEU preprocesses a segment). For 13a, chunks of texts
    are joined with SEPARATOR and tokenised in one call: 13a's rules act within a few characters
    and the separator (padded with spaces, as 13a pads every line) is left alone, so the result
    equals one call per text -- tests check it -- at a fraction of the per-call cost."""
    from sacrebleu.metrics import BLEU

    tokenizer = BLEU(tokenize=tokenize).tokenizer
    if tokenize != "13a" or any(SEPARATOR in t or "\n" in t for t in texts):
        return [tokenizer(t.rstrip()).split() for t in texts]
    out: list[list[str]] = []
    for start in range(0, len(texts), chunk):
        part = texts[start:start + chunk]
        tokens = tokenizer(f" {SEPARATOR} ".join(t.rstrip() for t in part)).split()
        pieces, current = [], []
        for token in tokens:
            if token == SEPARATOR:
                pieces.append(current)
                current = []
            else:
                current.append(token)
        pieces.append(current)
        if len(pieces) != len(part):  # cannot happen by the argument above; never trust it blindly
            pieces = [tokenizer(t.rstrip()).split() for t in part]
        out += pieces
    return out


def mbr_scores(nbest: NBestList, scores: np.ndarray, utility: str = "bleu", temperature: float = 1.0,
               tokenize: str = "13a", lowercase: bool = False) -> np.ndarray:
    """The mbr feature of every hypothesis, in percent (see the module doc)."""
    if utility not in UTILITIES:
        raise InputError(f"unknown MBR utility {utility!r} (known: {', '.join(UTILITIES)})")
    I, J, pair_offsets = pair_index(nbest.offsets)
    texts = [h.lower() for h in nbest.hyps] if lowercase else list(nbest.hyps)
    if utility == "bleu":
        U = bleu_utility(tokenize_many(texts, tokenize), nbest, I, J, pair_offsets)
    elif utility == "chrf":
        U = chrf_utility(texts, nbest, I, J, pair_offsets)
    else:
        U = ter_utility(texts, I, J)
    return 100.0 * expected_utility(U, I, posterior(scores, nbest.offsets, temperature)[J], nbest.n_hyps)


@dataclass(frozen=True)
class MBROptions:
    """Options of the mbr feature (flags of `rerank features`: --mbr-utility, --mbr-temperature,
    --mbr-score-feature, --mbr-tokenize)."""

    utility: str = "bleu"             # bleu, chrf or ter
    temperature: float = 1.0          # posterior = softmax(score / T) within each list
    score_feature: str | None = None  # log-probability column, `total`, or None: nmt if present, else total
    tokenize: str = "13a"             # BLEU tokeniser of the bleu utility


class MBRFeature(Feature):
    """`rerank features NBEST --which mbr`: the consensus feature, no model and no reference needed."""

    columns = ("mbr",)
    description = ("minimum-Bayes-risk expected utility of each hypothesis against the rest of its list, "
                   "weighted by the model posterior (no model or reference needed)")
    Options = MBROptions

    def add_arguments(self, group):
        group.add_argument("--mbr-utility", choices=UTILITIES, default="bleu",
                           help="utility: sentence BLEU+1, chrF, or -TER (default bleu; ter is much slower)")
        group.add_argument("--mbr-temperature", type=positive_float, default=1.0,
                           help="posterior = softmax(score / T) within each list (default 1)")
        group.add_argument("--mbr-score-feature", metavar="NAME",
                           help="the model log-probability column for the posterior, or `total` for the lists' "
                           "total scores (default: nmt when the list has it, else total)")
        group.add_argument("--mbr-tokenize", default="13a", help="BLEU tokeniser for the bleu utility (default 13a)")

    def options(self, args):
        return MBROptions(utility=args.mbr_utility, temperature=args.mbr_temperature,
                          score_feature=args.mbr_score_feature, tokenize=args.mbr_tokenize)

    def compute(self, nbest, which, context=None, options=None):
        context = context or FeatureContext()
        options = make_options(MBROptions, options)
        return {"mbr": mbr_scores(nbest, self.scores(nbest, options.score_feature, context.nbest_path),
                                  options.utility, options.temperature, options.tokenize)}

    @staticmethod
    def scores(nbest: NBestList, name: str | None, path: str) -> np.ndarray:
        if name is None:
            name = "nmt" if "nmt" in nbest.feature_names else "total"
        if name == "total":
            if nbest.scores is None:
                raise InputError("the list has no total scores: name its log-probability column as the MBR "
                                 "score feature", path)
            return nbest.scores
        if name not in nbest.feature_names:
            raise InputError(f"MBR score feature {name!r}: no such column (the list has "
                             f"{', '.join(nbest.feature_names) or 'no features'}"
                             + (" and no total scores" if nbest.scores is None else "") + ")", path)
        return nbest.column(name)
