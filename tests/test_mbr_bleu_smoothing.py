"""The MBR bleu utility's smoothing (`--mbr-bleu-smooth`, sacrebleu's names): sentence BLEU equals
sacrebleu's `sentence_score` with effective order for every method and value; exp is the sentence
BLEU that mbrs's BLEU utility scores with, so its MBR equals the brute-force expectation of
sacrebleu's scores; the default (add-k, k = 1) is BLEU+1, unchanged; a smoothing given to another
utility is refused."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from rerank import consensus as C
from rerank.cli import main
from rerank.errors import InputError
from rerank.metrics.bleu import hypothesis_stats, sentence_bleu, sentence_bleu_plus1
from rerank.nbest import NBestList

WORDS = "a b c d e f the dog cat , .".split()
LISTS = [
    ["the cat sat on the mat .", "a cat sat on the mat .", "the cat is on the mat", "the the the cat"],
    ["Hello , world !", "hello world"],
    ["only one"],
    ["3.5 km , 12-4", "3.5 km, 12 - 4", "", "km km km km km km"],
]
METHODS = [("add-k", None), ("add-k", 0.5), ("exp", None), ("floor", None), ("floor", 0.3), ("none", None)]


def random_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9))),
             " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))) for _ in range(n)]


@pytest.mark.parametrize("method,value", METHODS)
def test_sentence_bleu_is_sacrebleus_sentence_score(method, value):
    pairs = random_pairs(1500, seed=3)
    stats = hypothesis_stats([h for h, _ in pairs], np.arange(len(pairs) + 1), [[r for _, r in pairs]], "13a")
    scorer = BLEU(smooth_method=method, smooth_value=value, effective_order=True)
    expected = np.array([scorer.sentence_score(h, [r]).score / 100 for h, r in pairs])
    np.testing.assert_allclose(sentence_bleu(stats, method, value), expected, rtol=0, atol=1e-12)


def test_add_one_is_bleu_plus_one():
    pairs = random_pairs(1000, seed=4)
    stats = hypothesis_stats([h for h, _ in pairs], np.arange(len(pairs) + 1), [[r for _, r in pairs]], "13a")
    np.testing.assert_allclose(sentence_bleu(stats, "add-k"), sentence_bleu_plus1(stats), rtol=0, atol=1e-15)


def nbest_of(lists):
    feats = [np.array([[float(-k)] for k in range(len(hyps))]) for hyps in lists]
    return NBestList.from_lists(lists, feats, ["nmt"], [np.array([float(-k) for k in range(len(h))]) for h in lists])


@pytest.mark.parametrize("method,value", METHODS)
def test_exact_mbr_is_the_expectation_of_sacrebleus_sentence_bleu(method, value):
    """mbrs's `mbr` with its BLEU utility: sum_j p_j sentence_bleu(h_i, [h_j]), the list itself
    as pseudo-references (j = i included), here for every smoothing."""
    nbest = nbest_of(LISTS)
    scores = nbest.column("nmt")
    got = C.mbr_scores(nbest, scores, C.MBROptions("bleu", temperature=0.7, bleu_smooth=method,
                                                   bleu_smooth_value=value))
    p = C.posterior(scores, nbest.offsets, 0.7)
    scorer = BLEU(smooth_method=method, smooth_value=value, effective_order=True)
    hyps, offsets = list(nbest.hyps), nbest.offsets.tolist()
    for a, b in zip(offsets[:-1], offsets[1:]):
        for i in range(a, b):
            expected = sum(p[j] * scorer.sentence_score(hyps[i], [hyps[j]]).score for j in range(a, b))
            assert got[i] == pytest.approx(expected, abs=1e-9)


def test_the_default_is_unchanged_and_aggregate_takes_the_smoothing():
    nbest = nbest_of(LISTS)
    scores = nbest.column("nmt")
    default = C.mbr_scores(nbest, scores, C.MBROptions("bleu"))
    assert np.array_equal(default, C.mbr_scores(nbest, scores,
                                                C.MBROptions("bleu", bleu_smooth="add-k", bleu_smooth_value=1)))
    # all posterior mass on one hypothesis: the aggregate reference is that hypothesis (exact MBR's value)
    peaked = C.mbr_scores(nbest, scores, C.MBROptions("bleu", temperature=1e-6, bleu_smooth="exp", method="aggregate"))
    exact = C.mbr_scores(nbest, scores, C.MBROptions("bleu", temperature=1e-6, bleu_smooth="exp"))
    np.testing.assert_allclose(peaked, exact, atol=1e-9)
    assert not np.allclose(C.mbr_scores(nbest, scores, C.MBROptions("bleu", method="aggregate")),
                           C.mbr_scores(nbest, scores, C.MBROptions("bleu", bleu_smooth="exp", method="aggregate")))


def test_a_smoothing_for_another_utility_or_a_bad_value_is_refused(tmp_path, capsys):
    nbest = nbest_of(LISTS)
    scores = nbest.column("nmt")
    with pytest.raises(InputError, match="the chrf utility has none"):
        C.mbr_scores(nbest, scores, C.MBROptions("chrf", bleu_smooth="exp"))
    with pytest.raises(InputError, match="for add-k or floor, got 0.5 with bleu_smooth exp"):
        C.mbr_scores(nbest, scores, C.MBROptions("bleu", bleu_smooth="exp", bleu_smooth_value=0.5))
    with pytest.raises(InputError, match="unknown BLEU smoothing 'lin'"):
        sentence_bleu(np.zeros((1, 10)), "lin")
    (tmp_path / "in.nbest").write_text("0 ||| a b ||| nmt= -1 ||| -1\n0 ||| a c ||| nmt= -2 ||| -2\n")
    assert main(["features", str(tmp_path / "in.nbest"), "--which", "mbr", "--mbr-utility", "ter",
                 "--mbr-bleu-smooth", "exp", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the ter utility has none" in err[0]
    assert not (tmp_path / "out").exists()
    assert main(["features", str(tmp_path / "in.nbest"), "--which", "mbr", "--mbr-bleu-smooth", "exp",
                 "-o", str(tmp_path / "out")]) == 0
