"""Small n-best lists for the tuner tests (real Joshua bn-en output from tests/data)."""

from __future__ import annotations

import os

import numpy as np

from rerank.metrics.bleu import corpus_bleu, corpus_bleu_batch, hypothesis_stats, sentence_bleu_plus1
from rerank.formats import read_nbest, read_references
from rerank.nbest import NBestList
from rerank.tuning import TuningData, TuningMetric

JOSHUA = os.path.join(os.path.dirname(__file__), "data", "joshua-bn-en", "full")
NBEST = os.path.join(JOSHUA, "output.gold")
REFS = [os.path.join(JOSHUA, f"reference.en.{k}") for k in range(4)]


# hand-made sacrebleu-layout statistics [sys_len, ref_len, correct1-4, total1-4] of a 2-word hypothesis
GOOD = [2, 2, 2, 1, 0, 0, 2, 1, 0, 0]   # both words right: sentence BLEU+1 = 1
BAD = [2, 2, 0, 0, 0, 0, 2, 1, 0, 0]    # both words wrong: sentence BLEU+1 = 0


def hand_data(rows_stats, features, sizes=None) -> TuningData:
    """TuningData from hand-made statistics and features (no text needed); one list unless `sizes`."""
    features = np.asarray(features, dtype=float)
    sizes = sizes or [len(features)]
    offsets = np.r_[0, np.cumsum(sizes)]
    nbest = NBestList(offsets, [f"h{j}" for j in range(len(features))], features,
                      [f"f{k}" for k in range(features.shape[1])])
    metric = TuningMetric("bleu", np.asarray(rows_stats, dtype=float), corpus_bleu_batch, exact=corpus_bleu)
    return TuningData(nbest, np.arange(len(features)), metric, np.ones(features.shape[1], bool), len(features))


def joshua(first: int = 0, last: int = 100):
    """Sentences first..last-1 of the Joshua list and their 4 references."""
    nbest = read_nbest(NBEST)
    refs = read_references(REFS, nbest.n_sentences)
    keep = range(first, last)
    return nbest.select_sentences(list(keep)), [[stream[i] for i in keep] for stream in refs]


def list_with_reference(n: int = 30, seed: int = 0):
    """Joshua lists with reference 0 inserted at a random position of each list, and features
    [noise, sentence BLEU+1, noise]: the oracle (BLEU 100) is reachable by a positive weight on
    the middle feature, but zero and uniform weights miss it."""
    nbest, refs = joshua(0, n)
    rng = np.random.default_rng(seed)
    hyps = []
    for i in range(n):
        block = list(nbest.hyps[nbest.sentence(i)])
        block.insert(int(rng.integers(0, len(block) + 1)), refs[0][i])
        hyps.append(block)
    offsets = np.r_[0, np.cumsum([len(h) for h in hyps])]
    flat = [h for block in hyps for h in block]
    sbleu = sentence_bleu_plus1(hypothesis_stats(flat, offsets, refs, tokenize="none"))
    X = np.column_stack([rng.normal(0, 1, len(flat)), sbleu, rng.normal(0, 1, len(flat))])
    return NBestList(offsets, flat, X, ["noise1", "sbleu", "noise2"]), refs


def one_best(nbest: NBestList, w) -> list[str]:
    """The model 1-best of every list under weights w, picked one hypothesis at a time in plain
    Python (the first of equal scores wins): an independent reading for score checks."""
    w = [float(x) for x in w]
    picks = []
    for i in range(nbest.n_sentences):
        rows = range(int(nbest.offsets[i]), int(nbest.offsets[i + 1]))
        scores = [sum(a * b for a, b in zip(nbest.features[j].tolist(), w)) for j in rows]
        picks.append(nbest.hyps[rows[scores.index(max(scores))]])
    return picks
