"""Repetitive text (issue 46: one hypothesis of thousands of repeated words): BLEU statistics,
chrF scores and the MBR bleu and chrf utilities equal sacrebleu's on texts of a few distinct words
repeated many times, and the MBR n-gram matches do not loop over count levels (the work of
`pair_matches` does not grow with the largest n-gram count)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU, CHRF

from rerank import consensus as C
from rerank.metrics.bleu import corpus_bleu, hypothesis_stats
from rerank.metrics.sacre import CHRFMetric
from rerank.metrics.sacre_stats import corpus_segment_stats

WORDS = ["the", "cat", "a", ",", "3.5", "km", "aa", "é"]


@st.composite
def repetitive(draw, max_repeats: int = 600) -> str:
    """A text of a short motif of a few distinct words repeated up to `max_repeats` times, with a
    few words before and after (up to a few thousand tokens)."""
    vocab = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True))
    motif = draw(st.lists(st.sampled_from(vocab), min_size=1, max_size=4))
    repeats = draw(st.integers(0, max_repeats))
    head = draw(st.lists(st.sampled_from(WORDS), max_size=3))
    tail = draw(st.lists(st.sampled_from(vocab), max_size=3))
    return " ".join(head + motif * repeats + tail)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_bleu_statistics_of_repetitive_text_are_sacrebleus(data):
    """hypothesis_stats equals sacrebleu's per-segment statistics, and their sum its corpus BLEU."""
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    hyps = [data.draw(repetitive()) for _ in range(sum(sizes))]
    refs = [data.draw(repetitive()) for _ in sizes]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    got = hypothesis_stats(hyps, offsets, [refs])
    per_hyp_refs = [refs[s] for s, k in enumerate(sizes) for _ in range(k)]
    expect = np.asarray(corpus_segment_stats(BLEU(), hyps, [per_hyp_refs]), dtype=np.float64)
    np.testing.assert_array_equal(got, expect)
    assert corpus_bleu(got.sum(axis=0)) == pytest.approx(BLEU().corpus_score(hyps, [per_hyp_refs]).score, abs=1e-9)


@settings(max_examples=15, deadline=None)
@given(hyps=st.lists(repetitive(), min_size=1, max_size=3), refs=st.data())
def test_chrf_of_repetitive_text_is_sacrebleus(hyps, refs):
    refs = [refs.draw(repetitive()) for _ in hyps]
    metric = CHRFMetric()
    got = metric.score_from_stats(np.asarray(metric.sentence_stats(hyps, [refs])).sum(axis=0))
    assert got == pytest.approx(CHRF().corpus_score(hyps, [refs]).score, abs=1e-9)


@settings(max_examples=20, deadline=None)
@given(texts=st.lists(repetitive(), min_size=1, max_size=4), smooth=st.sampled_from(["add-k", "exp"]),
       chrf=st.booleans(), data=st.data())
def test_mbr_utilities_on_repetitive_lists_are_sacrebleus_sentence_scores(texts, smooth, chrf, data):
    """Exact MBR's utility of every pair of a list is sacrebleu's sentence score (BLEU with effective
    order and the utility's smoothing, or chrF); the aggregate reference of a one-hot posterior is
    that hypothesis, so the aggregate utility is its sentence score against it."""
    utility = C.CHRFUtility() if chrf else C.BLEUUtility(bleu_smooth=smooth)
    scorer = CHRF() if chrf else BLEU(smooth_method=smooth, effective_order=True)
    offsets = np.array([0, len(texts)], dtype=np.int64)
    group = C.list_of_row(offsets)
    I, J, _ = C.pair_index(offsets)
    got = utility.exact(None, texts, group, I, J)
    expect = [scorer.sentence_score(texts[i], [texts[j]]).score / 100 for i, j in zip(I.tolist(), J.tolist())]
    np.testing.assert_allclose(got, expect, rtol=0, atol=1e-9)
    k = data.draw(st.integers(0, len(texts) - 1))
    aggregate = utility.aggregate(None, texts, group, np.eye(len(texts))[k])
    expect = [scorer.sentence_score(t, [texts[k]]).score / 100 for t in texts]
    np.testing.assert_allclose(aggregate, expect, rtol=0, atol=1e-9)


@pytest.mark.parametrize("chrf", [False, True])
def test_mbr_matches_do_not_loop_over_count_levels(monkeypatch, chrf):
    """The exact MBR of a list with one hypothesis of many repeated words builds as many sparse
    matrices for 5,000 repetitions as for 5 (one per n-gram order: the work is linear in the text;
    a loop over count thresholds built one per repetition), and its values stay sacrebleu's."""
    from scipy import sparse

    built = []
    make = sparse.csr_matrix
    monkeypatch.setattr(sparse, "csr_matrix", lambda *args, **kwargs: built.append(1) or make(*args, **kwargs))
    utility, scorer = (C.CHRFUtility(), CHRF()) if chrf else (C.BLEUUtility(), BLEU(smooth_method="add-k",
                                                                                  effective_order=True))
    calls = []
    for repeats in (5, 5000):
        texts = ["the cat sat on the mat", " ".join(["the cat"] * repeats), "the the the cat"]
        offsets = np.array([0, 3], dtype=np.int64)
        I, J, _ = C.pair_index(offsets)
        built.clear()
        got = utility.exact(None, texts, C.list_of_row(offsets), I, J)
        calls.append(len(built))
        expect = [scorer.sentence_score(texts[i], [texts[j]]).score / 100 for i, j in zip(I.tolist(), J.tolist())]
        np.testing.assert_allclose(got, expect, rtol=0, atol=1e-9)
    assert calls[0] == calls[1] == (C.CHRF_CHAR_ORDER if chrf else 4)


@settings(max_examples=15, deadline=None)
@given(hyps=st.lists(repetitive(max_repeats=40), min_size=1, max_size=3), refs=st.data())
def test_ter_statistics_of_repetitive_text_are_sacrebleus(hyps, refs):
    """TER's edits and reference lengths on repetitive text (many equal shift candidates) equal
    sacrebleu's; its shift search is bounded as sacrebleu's is, so the cost stays linear."""
    from sacrebleu.metrics import TER

    from rerank.metrics.ter import segment_stats

    refs = [refs.draw(repetitive(max_repeats=40)) for _ in hyps]
    expect = np.asarray(TER()._extract_corpus_statistics(hyps, [refs]), dtype=np.float64)
    np.testing.assert_array_equal(segment_stats(hyps, [refs]), expect)
