"""MBR with reference aggregation (--mbr-method aggregate): equal to a Counter-by-Counter
implementation on sacrebleu's n-gram extractors, equal to exact MBR when the posterior is on
one hypothesis, at least the expected matches (min is concave), invariant to order and blocks."""

import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics.helpers import extract_all_char_ngrams, extract_word_ngrams

import rerank
from rerank import consensus as C
from rerank.metrics.bleu import sentence_bleu_plus1
from rerank.consensus import MBRFeature, MBROptions
from rerank.errors import InputError
from rerank.formats import read_nbest
from rerank.metrics.sacre import CHRFMetric
from rerank.nbest import NBestList

LISTS = [
    ["the cat sat on the mat .", "a cat sat on the mat .", "the cat is on the mat", "the the the cat"],
    ["Hello , world !", "hello world"],
    ["only one"],
    ["3.5 km , 12-4", "3.5 km, 12 - 4", "", "km km km km km km"],
]
SHIPPED = os.path.join(os.path.dirname(rerank.__file__), "data", "multi30k", "optimised.val.20best.gz")


def make(lists, scores=None):
    """Lists with nmt = total = 0, -1, -2, ... (or the given scores)."""
    scores = scores or [np.array([-float(k) for k in range(len(hyps))]) for hyps in lists]
    return with_scores(lists, scores)

words = st.lists(st.sampled_from(["a", "b", "c", "a.", ",", "1", "b-2", "Ü", "ab"]), max_size=7).map(" ".join)
random_lists = st.lists(st.lists(words, min_size=1, max_size=5), min_size=1, max_size=4)


def with_scores(lists, scores):
    return NBestList.from_lists(lists, [np.asarray(s, dtype=float).reshape(-1, 1) for s in scores], ["nmt"], scores)


def counter_aggregate(nbest, scores, utility, temperature=1.0):
    """The aggregate feature list by list with Counters of sacrebleu's own n-grams (the reference)."""
    p = C.posterior(scores, nbest.offsets, temperature)
    tokens = C.tokenize_many(list(nbest.hyps))
    chrf, out = CHRFMetric(), []
    for s in range(nbest.n_sentences):
        rows = range(nbest.offsets[s], nbest.offsets[s + 1])
        if utility == "bleu":
            grams = [[extract_word_ngrams(tokens[r], n) for n in range(1, 5)] for r in rows]
            lengths = [len(tokens[r]) for r in rows]
        else:
            grams = [extract_all_char_ngrams(nbest.hyps[r], C.CHRF_CHAR_ORDER) for r in rows]
        expected = [Counter() for _ in grams[0]]
        for k, r in enumerate(rows):
            for n, counter in enumerate(grams[k]):
                for g, c in counter.items():
                    expected[n][g] += p[r] * c
        for k in range(len(rows)):
            matches = [sum(min(c, expected[n][g]) for g, c in grams[k][n].items()) for n in range(len(expected))]
            totals = [sum(counter.values()) for counter in grams[k]]
            if utility == "bleu":
                ref_len = sum(p[q] * lengths[j] for j, q in enumerate(rows))
                out.append(sentence_bleu_plus1(np.array([lengths[k], ref_len] + matches + totals, dtype=float)))
            else:
                ref_totals = [sum(p[q] * sum(grams[j][n].values()) for j, q in enumerate(rows)) for n in range(len(expected))]
                stats = [x for n in range(len(expected)) for x in (totals[n], ref_totals[n], matches[n])]
                out.append(chrf.score_from_stats(np.array(stats)) / 100)
    return 100 * np.array(out, dtype=float)


@pytest.mark.parametrize("utility", ["bleu", "chrf"])
def test_aggregate_equals_counters_of_sacrebleus_ngrams(utility):
    nbest = make(LISTS)
    np.testing.assert_allclose(C.mbr_scores(nbest, nbest.scores, C.MBROptions(utility, method="aggregate")),
                               counter_aggregate(nbest, nbest.scores, utility), rtol=0, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(random_lists, st.floats(0.1, 10))
def test_aggregate_equals_counters_on_random_lists(lists, temperature):
    nbest = make(lists)
    for utility in ("bleu", "chrf"):
        np.testing.assert_allclose(C.mbr_scores(nbest, nbest.scores,
                                                C.MBROptions(utility, temperature, method="aggregate")),
                                   counter_aggregate(nbest, nbest.scores, utility, temperature), rtol=0, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(random_lists)
def test_aggregate_equals_exact_when_the_posterior_is_on_one_hypothesis(lists):
    # scores 0, -1, -2, ... at T = 1e-3: the posterior is exactly (1, 0, ..., 0), and the aggregate
    # reference is the 1-best's own counts; BLEU+1's smoothing acts on the same statistics in both
    nbest = make(lists)
    assert set(np.unique(C.posterior(nbest.scores, nbest.offsets, 1e-3))) <= {0.0, 1.0}
    for utility in ("bleu", "chrf"):
        np.testing.assert_allclose(C.mbr_scores(nbest, nbest.scores, C.MBROptions(utility, 1e-3, method="aggregate")),
                                   C.mbr_scores(nbest, nbest.scores, C.MBROptions(utility, 1e-3)), rtol=0, atol=1e-12)


def test_one_hypothesis_lists_score_100_in_every_method():
    nbest = make([["a b c"], ["x y"], ["Hello , world !"]])
    for utility in ("bleu", "chrf"):
        for method in (m for m in C.METHODS if m != "centroid"):   # centroid needs embeddings: refused for text
            np.testing.assert_allclose(C.mbr_scores(nbest, nbest.scores, C.MBROptions(utility, method=method)), 100.0,
                                       atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(random_lists, st.floats(0.1, 10))
def test_aggregate_matches_are_at_least_the_expected_matches(lists, temperature):
    # min(c_i, sum_j p_j c_j) >= sum_j p_j min(c_i, c_j): min(c_i, .) is concave
    nbest = make(lists)
    p = C.posterior(nbest.scores, nbest.offsets, temperature)
    ids, bounds = C.integer_sequences(C.tokenize_many(list(nbest.hyps)))
    group = nbest.sentence_of_hyp
    I, J, pair_offsets = C.pair_index(nbest.offsets)
    for n in range(1, 5):
        _, _, aggregate = C.aggregate_matches(C.NgramCounter(ids, bounds, group), group, p, n)
        pairs, _ = C.pair_matches(ids, bounds, group, n, I, pair_offsets, nbest.offsets)
        assert np.all(aggregate >= C.expected_utility(pairs, I, p[J], nbest.n_hyps) - 1e-12)


@settings(max_examples=30, deadline=None)
@given(random_lists, st.randoms(use_true_random=False))
def test_aggregate_is_invariant_to_hypothesis_and_sentence_order(lists, rnd):
    nbest = make(lists)
    sentences = list(range(len(lists)))
    rnd.shuffle(sentences)
    orders = [rnd.sample(range(len(lists[s])), len(lists[s])) for s in sentences]
    shuffled = with_scores([[lists[s][k] for k in order] for s, order in zip(sentences, orders)],
                           [[-float(k) for k in order] for order in orders])
    rows = [int(nbest.offsets[s]) + k for s, order in zip(sentences, orders) for k in order]
    for utility in ("bleu", "chrf"):
        base = C.mbr_scores(nbest, nbest.scores, C.MBROptions(utility, method="aggregate"))
        np.testing.assert_allclose(C.mbr_scores(shuffled, shuffled.scores, C.MBROptions(utility, method="aggregate")),
                                   base[rows], rtol=0, atol=1e-10)


def test_splitting_a_hypothesis_into_two_copies_of_half_its_mass_changes_no_score():
    lists = [["a b c d e", "a b c d x", "a b x y", "z z z"]]
    nbest = make(lists, scores=[np.array([0.0, -0.5, -1.0, -2.0])])
    split = make([lists[0] + ["a b c d x"]], scores=[np.array([0.0, -0.5 - np.log(2), -1.0, -2.0, -0.5 - np.log(2)])])
    for utility in ("bleu", "chrf"):
        base = C.mbr_scores(nbest, nbest.scores, C.MBROptions(utility, method="aggregate"))
        np.testing.assert_allclose(C.mbr_scores(split, split.scores, C.MBROptions(utility, method="aggregate")),
                                   np.append(base, base[1]), rtol=0, atol=1e-10)


def test_aggregate_blocks_equal_one_block():
    nbest = read_nbest(SHIPPED).select_sentences(range(30))
    for utility in ("bleu", "chrf"):
        whole = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility, method="aggregate"), block_hyps=10 ** 9)
        for block_hyps in (1, 7 * 20):
            # the same numbers; a block's own unit ids may order a row's sum of matches differently
            np.testing.assert_allclose(C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility, method="aggregate"),
                                                    block_hyps=block_hyps), whole, rtol=0, atol=1e-10)


def test_the_consensus_hypothesis_wins_and_low_temperature_is_the_1best():
    nbest = make([["a b c d e", "a b c d x", "a b c d y", "z z z z z"]], scores=[np.zeros(4)])
    for utility in ("bleu", "chrf"):
        mbr = C.mbr_scores(nbest, nbest.scores, C.MBROptions(utility, method="aggregate"))
        assert int(np.argmax(mbr)) == 0 and int(np.argmin(mbr)) == 3  # higher is better
    peaked = make([["z z z z z", "a b c d e", "a b c d x", "a b c d y"]], scores=[np.array([0.0, -1.0, -1.5, -2.0])])
    for utility in ("bleu", "chrf"):
        assert int(np.argmax(C.mbr_scores(peaked, peaked.scores, C.MBROptions(utility, 0.01, method="aggregate")))) == 0


def test_character_units_equal_the_exact_paths_units():
    texts = ["a b\tc", "", "  Ü ß\u00a0x\u2003y ", "日本 語", "x" * 5000]
    ids, bounds = C.char_sequences(texts)
    ref_ids, ref_bounds = C.integer_sequences([[c for c in t if not c.isspace()] for t in texts])
    assert bounds.tolist() == ref_bounds.tolist()
    chars = [sorted({c for t in texts for c in t if not c.isspace()})]
    decoded = [[chars[0][i] for i in ids[a:b]] for a, b in zip(bounds[:-1], bounds[1:])]
    assert decoded == [[c for c in t if not c.isspace()] for t in texts]


def test_ter_aggregate_and_unknown_method_are_refused():
    nbest = make(LISTS)
    with pytest.raises(InputError, match="aggregate MBR method needs an n-gram utility"):
        C.mbr_scores(nbest, nbest.scores, C.MBROptions("ter", method="aggregate"))
    with pytest.raises(InputError, match="aggregate MBR method needs an n-gram utility"):
        MBRFeature().compute(nbest, ["mbr"], options=MBROptions(utility="ter", method="aggregate", score_feature="total"))


def test_options_and_flag_select_the_method():
    nbest = make(LISTS)
    got = MBRFeature().compute(nbest, ["mbr"], options={"method": "aggregate", "utility": "chrf"})["mbr"]
    np.testing.assert_array_equal(got, C.mbr_scores(nbest, nbest.column("nmt"),
                                                    C.MBROptions("chrf", method="aggregate")))
    assert MBROptions().method == "exact"
    import argparse

    parser = argparse.ArgumentParser()
    MBRFeature().add_arguments(parser)
    assert MBRFeature().options_from_args(parser.parse_args([])).method == "exact"
    assert MBRFeature().options_from_args(parser.parse_args(["--mbr-method", "aggregate"])).method == "aggregate"
    with pytest.raises(SystemExit):
        parser.parse_args(["--mbr-method", "fast"])


awkward_text = st.lists(st.sampled_from(["a", "3.5", "12-4", "x.", ".,", "&quot;", "&amp;", "<skipped>", "-", "Ü",
                                         "\t", " ", "  ", "\u00a0", "\u3000", "(b)", "1,000", "$", "'s"]),
                        max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(awkward_text, max_size=8))
def test_token_sequences_equal_one_sacrebleu_call_per_text(texts):
    """13a word by word (each distinct word tokenised once) gives every text's sacrebleu tokens."""
    from sacrebleu.metrics import BLEU

    tokenizer = BLEU(tokenize="13a").tokenizer
    ids, bounds = C.token_sequences(texts)
    vocab: dict[int, str] = {}
    for t, text in enumerate(texts):
        expected = tokenizer(text.rstrip()).split()
        got = ids[bounds[t]:bounds[t + 1]].tolist()
        assert len(got) == len(expected)
        for i, token in zip(got, expected):
            assert vocab.setdefault(i, token) == token
    assert len(set(vocab.values())) == len(vocab)
