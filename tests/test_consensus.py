"""MBR / consensus feature: pairwise utilities equal sacrebleu's, posteriors, expected utility."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import TER

import rerank
from rerank import consensus as C
from rerank.metrics.bleu import sentence_bleu_plus1
from rerank.cli import main
from rerank.errors import InputError
from rerank.formats import read_nbest
from rerank.metrics.sacre import BLEUMetric, CHRFMetric
from rerank.nbest import NBestList

LISTS = [
    ["the cat sat on the mat .", "a cat sat on the mat .", "the cat is on the mat", "the the the cat"],
    ["Hello , world !", "hello world"],
    ["only one"],
    ["3.5 km , 12-4", "3.5 km, 12 - 4", "", "km km km km km km"],
]


def make(lists, scores=None):
    feats = [np.array([[float(-k)] for k in range(len(hyps))]) for hyps in lists]
    totals = scores or [np.array([float(-k) for k in range(len(hyps))]) for hyps in lists]
    return NBestList.from_lists(lists, feats, ["nmt"], totals)


def direct(nbest, utility):
    """The same utilities one pair at a time through sacrebleu (BLEU+1 / chrF / -TER)."""
    I, J, _ = C.pair_index(nbest.offsets)
    texts, out = list(nbest.hyps), []
    bleu, chrf, ter = BLEUMetric(tokenize="13a"), CHRFMetric(), TER()
    for i, j in zip(I.tolist(), J.tolist()):
        if utility == "bleu":
            out.append(sentence_bleu_plus1(bleu.sentence_stats([texts[i]], [[texts[j]]]))[0])
        elif utility == "chrf":
            out.append(chrf.score_from_stats(chrf.sentence_stats([texts[i]], [[texts[j]]])[0]) / 100)
        else:
            out.append(-ter.sentence_score(texts[i], [texts[j]]).score / 100)
    return I, J, np.array(out)


def utilities(nbest, utility):
    I, J, offsets = C.pair_index(nbest.offsets)
    texts = list(nbest.hyps)
    if utility == "bleu":
        from sacrebleu.metrics import BLEU

        tok = BLEU(tokenize="13a").tokenizer
        return C.bleu_utility([tok(t.rstrip()).split() for t in texts], nbest.offsets, I, J, offsets)
    if utility == "chrf":
        return C.chrf_utility(texts, nbest.offsets, I, J, offsets)
    return C.ter_utility(texts, I, J)


def test_pairs_are_every_ordered_pair_of_each_list():
    I, J, offsets = C.pair_index(np.array([0, 2, 3, 3, 5]))
    assert list(zip(I.tolist(), J.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 2), (3, 3), (3, 4), (4, 3), (4, 4)]
    assert offsets.tolist() == [0, 4, 5, 5, 9]


@pytest.mark.parametrize("utility", C.UTILITIES)
def test_pairwise_utilities_equal_sacrebleu_pair_by_pair(utility):
    nbest = make(LISTS)
    np.testing.assert_allclose(utilities(nbest, utility), direct(nbest, utility)[2], rtol=0, atol=1e-12)


words = st.lists(st.sampled_from(["a", "b", "c", "a.", ",", "1", "b-2", "Ü"]), max_size=7).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(words, min_size=1, max_size=4), min_size=1, max_size=4))
def test_bleu_and_chrf_utilities_equal_sacrebleu_on_random_lists(lists):
    nbest = make(lists)
    for utility in ("bleu", "chrf"):
        np.testing.assert_allclose(utilities(nbest, utility), direct(nbest, utility)[2], rtol=0, atol=1e-12)


def test_posterior_is_a_softmax_within_each_list():
    p = C.posterior(np.array([0.0, np.log(3.0), 5.0, 1.0, 1.0]), np.array([0, 2, 3, 5]), temperature=1.0)
    np.testing.assert_allclose(p, [0.25, 0.75, 1.0, 0.5, 0.5])
    p2 = C.posterior(np.array([0.0, np.log(9.0)]), np.array([0, 2]), temperature=2.0)
    np.testing.assert_allclose(p2, [0.25, 0.75])
    with pytest.raises(Exception, match="must be > 0"):
        C.posterior(np.zeros(2), np.array([0, 2]), temperature=0)


def test_expected_utility_by_hand():
    # one list of three: p = (0.5, 0.3, 0.2); U[i, j] given row-major; the sum includes j = i
    U = np.array([1.0, 0.4, 0.6, 0.2, 1.0, 0.9, 0.1, 0.8, 1.0])
    I, J, _ = C.pair_index(np.array([0, 3]))
    p = np.array([0.5, 0.3, 0.2])
    got = C.expected_utility(U, I, p[J], 3)
    np.testing.assert_allclose(got, [0.5 + 0.3 * 0.4 + 0.2 * 0.6, 0.5 * 0.2 + 0.3 + 0.2 * 0.9, 0.5 * 0.1 + 0.3 * 0.8 + 0.2])


def test_low_temperature_is_the_model_1best_and_high_temperature_pure_consensus():
    nbest = make([["z z z z z", "a b c d e", "a b c d x", "a b c d y"]], scores=[np.array([0.0, -1.0, -1.5, -2.0])])
    assert int(np.argmax(C.mbr_scores(nbest, nbest.scores, C.MBROptions(temperature=0.01)))) == 0
    assert int(np.argmin(C.mbr_scores(nbest, nbest.scores, C.MBROptions(temperature=1000.0)))) == 0
    assert C.mbr_scores(make([["only one"]]), np.zeros(1)).tolist() == [pytest.approx(100.0)]  # percent


def test_the_consensus_hypothesis_wins():
    nbest = make([["a b c d e", "a b c d x", "a b c d y", "z z z z z"]], scores=[np.zeros(4)])
    mbr = C.mbr_scores(nbest, nbest.scores)
    assert int(np.argmax(mbr)) == 0 and int(np.argmin(mbr)) == 3


def test_features_command_adds_mbr(tmp_path, capsys):
    nbest = make(LISTS)
    path = tmp_path / "in.nbest"
    path.write_text("".join(f"{i} ||| {h} ||| nmt= {-k} ||| {-k}\n" for i, hyps in enumerate(LISTS)
                            for k, h in enumerate(hyps)), encoding="utf-8")
    assert main(["features", str(path), "--which", "mbr", "--mbr-temperature", "0.5", "-o", str(tmp_path / "o")]) == 0
    out = read_nbest(str(tmp_path / "o"))
    assert out.feature_names == ["nmt", "mbr"]
    np.testing.assert_allclose(out.column("mbr"), C.mbr_scores(nbest, nbest.scores, C.MBROptions(temperature=0.5)),
                               atol=1e-12)
    assert main(["features", str(path), "--which", "mbr", "--mbr-score-feature", "lm", "-o", str(tmp_path / "x")]) == 2
    assert "--mbr-score-feature 'lm': no such column (the list has nmt)" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


texts = st.lists(st.sampled_from(["a", "1", "2.5", "x.", ",", "&quot;", "&amp;", "<skipped>", "-", "3-4", "Ü", "$",
                                  "(b)", ".c", "e,f", "'", '"', "--", "..."]), max_size=8).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, min_size=1, max_size=6))
def test_joined_13a_tokenisation_equals_one_call_per_text(batch):
    from sacrebleu.metrics import BLEU

    tok = BLEU(tokenize="13a").tokenizer
    assert C.tokenize_many(batch, chunk=4) == [tok(t.rstrip()).split() for t in batch]


# ---- blocks: memory bounded by the largest list, results those of the whole file ---------------

SHIPPED = os.path.join(os.path.dirname(rerank.__file__), "data", "multi30k", "optimised.val.20best.gz")


def whole_file(nbest, scores, utility):
    """The mbr column as one computation over every pair of the whole file (the pre-block code path)."""
    I, J, pair_offsets = C.pair_index(nbest.offsets)
    texts = list(nbest.hyps)
    if utility == "bleu":
        U = C.bleu_utility(C.tokenize_many(texts), nbest.offsets, I, J, pair_offsets)
    elif utility == "chrf":
        U = C.chrf_utility(texts, nbest.offsets, I, J, pair_offsets)
    else:
        U = C.ter_utility(texts, I, J)
    return 100.0 * C.expected_utility(U, I, C.posterior(scores, nbest.offsets)[J], nbest.n_hyps)


@pytest.fixture(scope="module")
def shipped_slice():
    return read_nbest(SHIPPED).select_sentences(range(40))


@pytest.mark.parametrize("utility", ["bleu", "chrf"])
def test_blocks_of_one_several_or_all_sentences_equal_the_whole_file(shipped_slice, utility):
    nbest, scores = shipped_slice, shipped_slice.column("nmt")
    reference = whole_file(nbest, scores, utility)
    for block_pairs in (1, 7 * 20 ** 2, 10 ** 9):  # one list per block, seven lists, the whole file
        np.testing.assert_array_equal(C.mbr_scores(nbest, scores, C.MBROptions(utility), block_pairs=block_pairs),
                                      reference)


def test_ter_blocks_equal_the_whole_file():
    nbest = make(LISTS)
    np.testing.assert_array_equal(C.mbr_scores(nbest, nbest.scores, C.MBROptions("ter"), block_pairs=1),
                                  whole_file(nbest, nbest.scores, "ter"))


def test_no_block_holds_more_pairs_than_the_budget_or_its_largest_list(shipped_slice, monkeypatch):
    built = []
    real = C.pair_index
    monkeypatch.setattr(C, "pair_index", lambda offsets: built.append(int((np.diff(offsets) ** 2).sum())) or real(offsets))
    nbest = shipped_slice.select_sentences(range(12))
    C.mbr_scores(nbest, nbest.column("nmt"), block_pairs=1000)
    assert len(built) == 6 and max(built) <= 1000  # 20-best lists: 400 pairs each, two per block
    built.clear()
    C.mbr_scores(nbest, nbest.column("nmt"), block_pairs=10)
    assert built == [400] * 12  # a list larger than the budget is a block of its own


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=30), st.integers(1, 100))
def test_sentence_blocks_cover_every_sentence_in_order_within_the_budget(cost, budget):
    blocks = C.sentence_blocks(np.array(cost, dtype=np.int64), budget)
    assert [s for a, b in blocks for s in range(a, b)] == list(range(len(cost)))
    for a, b in blocks:
        assert b > a and (sum(cost[a:b]) <= budget or b == a + 1)
    for (a, b), (c, _) in zip(blocks, blocks[1:]):  # greedy: the next sentence did not fit
        assert sum(cost[a:b]) + cost[c] > budget


def test_bad_method_block_size_and_score_count_are_input_errors():
    nbest = make(LISTS)
    with pytest.raises(InputError, match="unknown MBR method 'fast'"):
        C.mbr_scores(nbest, nbest.scores, C.MBROptions(method="fast"))
    with pytest.raises(InputError, match="block sizes must be >= 1"):
        C.mbr_scores(nbest, nbest.scores, block_pairs=0)
    with pytest.raises(InputError, match="3 values for 11 hypotheses"):
        C.mbr_scores(nbest, np.zeros(3))
