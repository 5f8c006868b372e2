"""Exact MBR's work is cut into pieces for its memory (issue 47): the (pair, n-gram) records of
`add_shared` (PAIR_CHUNK), the pairs of chrF's formula (SCORE_CHUNK) and the lists of a block
(block_pairs). However small the pieces, the values are the same numbers, bit for bit, and
sacrebleu's chrF."""

from __future__ import annotations

import numpy as np
import pytest
from sacrebleu.metrics import CHRF

from rerank import consensus as C
from rerank.nbest import NBestList

LISTS = [
    ["the the the cat sat on the the mat .", "a cat sat on the mat the the .", "the cat", "the the the the"],
    ["aaaa aaaa bbb", "aaaa bbb aaaa aaaa", "", "ab ab ab ab ab"],
    ["only one"],
    ["Hello , world !", "hello world", "Hello world !!", "world , Hello"],
]


def make():
    feats = [np.array([[-0.3 * k] for k in range(len(hyps))]) for hyps in LISTS]
    return NBestList.from_lists(LISTS, feats, ["nmt"], [f[:, 0] for f in feats])


@pytest.mark.parametrize("utility", ["bleu", "chrf"])
def test_small_pieces_give_the_same_numbers(monkeypatch, utility):
    nbest = make()
    whole = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility), block_pairs=10 ** 9)
    monkeypatch.setattr(C, "PAIR_CHUNK", 3)
    monkeypatch.setattr(C, "SCORE_CHUNK", 5)
    for block_pairs in (1, 20, 10 ** 9):
        np.testing.assert_array_equal(
            C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility), block_pairs=block_pairs), whole)


@pytest.mark.parametrize("word_order", [0])   # chrF++ is no MBR option: its words here are split at spaces alone
def test_chrf_in_small_pieces_is_sacrebleus(monkeypatch, word_order):
    monkeypatch.setattr(C, "PAIR_CHUNK", 2)
    monkeypatch.setattr(C, "SCORE_CHUNK", 3)
    texts = [t for hyps in LISTS for t in hyps]
    offsets = np.asarray(make().offsets, dtype=np.int64)
    I, J, pair_offsets = C.pair_index(offsets)
    got = C.chrf_utility(texts, offsets, I, J, pair_offsets, word_order)
    chrf = CHRF(word_order=word_order)
    expected = [chrf.sentence_score(texts[i], [texts[j]]).score / 100 for i, j in zip(I.tolist(), J.tolist())]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
