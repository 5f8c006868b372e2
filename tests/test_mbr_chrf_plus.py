"""chrF++ as an MBR utility (`--mbr-chrf-word-order 2`): sacrebleu's sentence chrF++ for every pair,
its words split as sacrebleu splits them, in the exact and aggregate methods and the matrix folder."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics.chrf import CHRF

from rerank import consensus as C
from rerank.errors import InputError
from rerank.nbest import NBestList
from rerank.options import make_options

WORDS = ["Ein", "Hund", "Hund.", "(läuft)", "schnell,", "ein", "!", "Mann", "Mann?", "'s", "über-all", "x"]


def make(lists: list[list[str]], seed: int = 0) -> NBestList:
    rng = np.random.default_rng(seed)
    feats = [np.sort(rng.normal(size=(len(h), 1)), axis=0)[::-1] for h in lists]
    return NBestList.from_lists(lists, feats, ["nmt"], [f[:, 0] for f in feats])


texts_lists = st.lists(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=7).map(" ".join),
                                min_size=1, max_size=5), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(lists=texts_lists)
def test_every_pair_is_sacrebleus_sentence_chrf_plus_plus(lists):
    nbest = make(lists)
    texts = list(nbest.hyps)
    offsets = np.asarray(nbest.offsets, dtype=np.int64)
    I, J, pair_offsets = C.pair_index(offsets)
    got = C.chrf_utility(texts, offsets, I, J, pair_offsets, word_order=2)
    chrf = CHRF(word_order=2)
    expected = [chrf.sentence_score(texts[i], [texts[j]]).score / 100 for i, j in zip(I.tolist(), J.tolist())]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_the_words_are_split_as_sacrebleu_splits_them():
    """'Hund.' against 'Hund' shares the word unigram 'Hund' (sacrebleu's punctuation split): a plain
    whitespace split would share none and give a lower chrF++."""
    nbest = make([["ein Hund .", "ein Hund."]])
    offsets = np.asarray(nbest.offsets, dtype=np.int64)
    I, J, pair_offsets = C.pair_index(offsets)
    got = C.chrf_utility(list(nbest.hyps), offsets, I, J, pair_offsets, word_order=2)
    expected = CHRF(word_order=2).sentence_score("ein Hund .", ["ein Hund."]).score / 100
    assert got[1] == pytest.approx(expected, abs=1e-12)
    assert C.chrf_words(["ein Hund."])[1].tolist() == [0, 3]   # ein, Hund, .


@pytest.mark.parametrize("method", ["exact", "aggregate"])
def test_the_option_reaches_the_utility_and_the_posterior_limit_holds(method):
    """With the posterior on each list's first hypothesis (T -> 0), both methods give each row its
    chrF++ against that hypothesis, and chrF++ differs from chrF there."""
    lists = [["Ein Hund läuft.", "Ein Hund (läuft) schnell", "ein Mann ?"], ["x über-all", "x über-all !", "Mann."]]
    nbest = make(lists)
    scores = np.zeros(nbest.n_hyps)
    scores[np.asarray(nbest.offsets[:-1])] = 1.0
    plus = C.mbr_scores(nbest, scores, C.MBROptions("chrf", temperature=1e-3, method=method, chrf_word_order=2))
    plain = C.mbr_scores(nbest, scores, C.MBROptions("chrf", temperature=1e-3, method=method))
    chrf = CHRF(word_order=2)
    expected = [chrf.sentence_score(h, [lists[i][0]]).score for i, hyps in enumerate(lists) for h in hyps]
    np.testing.assert_allclose(plus, expected, atol=1e-6)
    assert not np.allclose(plus, plain)


def test_word_order_is_the_chrf_utilitys_and_has_a_ceiling():
    nbest = make([["a b", "a c"]])
    with pytest.raises(InputError, match=r"chrf_word_order is the chrf utility's; the bleu utility has no word"):
        C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("bleu", chrf_word_order=2))
    with pytest.raises(InputError, match="chrf_word_order' of MBROptions must be one of 0, 1, 2, 3, 4, 5, 6, got 7"):
        make_options(C.MBROptions, {"utility": "chrf", "chrf_word_order": 7})   # the boundary's check


def test_a_matrix_folder_knows_the_word_order(tmp_path):
    nbest = make([["Ein Hund.", "ein Hund", "Mann ?"]])
    folder = str(tmp_path / "m")
    written = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("chrf", chrf_word_order=2, matrix=folder))
    read = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("chrf", chrf_word_order=2, matrix=folder))
    np.testing.assert_array_equal(read, written)
    with pytest.raises(InputError, match="utility matrix was made by"):
        C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("chrf", matrix=folder))
