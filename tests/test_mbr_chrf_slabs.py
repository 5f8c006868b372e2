"""Exact chrF MBR over long lists takes the rows a slab at a time (rerank.consensus.CHRFPairs,
rows_expected_utility), so that its memory is bounded by the slab and not the list's n^2 pairs.
The split changes no number: the slabs' values equal the unsplit path's bit for bit, for any slab
size, posterior (zeros included: pseudo-references that are not), candidates and lists; and any
set of rows scores as those rows of every pair."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rerank import consensus as C
from rerank.nbest import NBestList

WORDS = ["aa", "ab", "aab", "b", "bbb", "ca", "abc", "cab", "a", "acca", "ba"]

texts_strategy = st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=7).map(" ".join),
                          min_size=1, max_size=9)


@st.composite
def blocks(draw):
    lists = draw(st.lists(texts_strategy, min_size=1, max_size=4))
    texts = [t for hyps in lists for t in hyps]
    offsets = np.concatenate([[0], np.cumsum([len(h) for h in lists])]).astype(np.int64)
    weights = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), min_size=len(texts),
                                     max_size=len(texts))))
    group = C.list_of_row(offsets)
    mass = np.bincount(group, weights=weights, minlength=len(lists))
    weights = np.where(mass[group] > 0, weights, 1.0)          # each list keeps a pseudo-reference
    mass = np.bincount(group, weights=weights, minlength=len(lists))
    p = weights / mass[group]
    candidates = np.array(draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts))))
    return texts, offsets, p, (candidates if draw(st.booleans()) else None)


def unsplit(texts, offsets, p, candidates):
    """block_scores' exact path with no split (every pair of the block at once)."""
    group = C.list_of_row(offsets)
    I, J, _ = C.pair_index(offsets)
    keep = (p[J] > 0) & (np.ones(len(I), dtype=bool) if candidates is None else candidates[I])
    I, J = I[keep], J[keep]
    return C.expected_utility(C.CHRFUtility().exact(None, texts, group, I, J), I, p[J], len(texts))


@settings(max_examples=60, deadline=None)
@given(blocks(), st.integers(1, 40))
def test_the_slabs_give_the_unsplit_values_bit_for_bit(block, step):
    texts, offsets, p, candidates = block
    split = C.rows_expected_utility(C.CHRFPairs(texts, offsets), p, candidates, step)
    assert np.array_equal(split, unsplit(texts, offsets, p, candidates))


@settings(max_examples=40, deadline=None)
@given(blocks(), st.data())
def test_any_rows_score_as_those_rows_of_every_pair(block, data):
    texts, offsets, _, _ = block
    asked = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts)))))
    I, J, pair_offsets = C.pair_index(offsets)
    every = C.chrf_utility(texts, offsets, I, J, pair_offsets)
    scorer = C.CHRFPairs(texts, offsets)
    rows_I, rows_J = scorer.pairs(asked)
    wanted = np.isin(I, asked)
    assert np.array_equal(rows_I, I[wanted]) and np.array_equal(rows_J, J[wanted])
    assert np.array_equal(scorer.rows(asked), every[wanted])


def test_a_long_list_is_split_and_scores_as_unsplit(monkeypatch):
    rng = np.random.default_rng(3)
    n = 600   # 360,000 pairs: above ROW_SLAB_PAIRS, so mbr_scores takes the slabs
    assert n * n > C.ROW_SLAB_PAIRS
    hyps = [" ".join(rng.choice(WORDS, size=rng.integers(1, 12))) for _ in range(n)]
    nbest = NBestList.from_lists([hyps], [np.zeros((n, 0))], [], [rng.normal(size=n)])
    options = C.MBROptions("chrf", temperature=3.0)
    calls = []
    slabs = C.rows_expected_utility
    monkeypatch.setattr(C, "rows_expected_utility", lambda *a, **k: calls.append(1) or slabs(*a, **k))
    split = C.mbr_scores(nbest, nbest.scores, options)
    assert calls   # the slabs were taken
    monkeypatch.setattr(C, "ROW_SLAB_PAIRS", n * n)
    calls.clear()
    whole = C.mbr_scores(nbest, nbest.scores, options)
    assert not calls and np.array_equal(split, whole)
