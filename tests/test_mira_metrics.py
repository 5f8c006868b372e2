"""MIRA and PRO tuned for chrF, TER and METEOR: sentence-level gains, reached oracles, corpus scores."""

import numpy as np
import pytest
import sacrebleu

from rerank.mira.kbmira import KBMira, fixed_gains, kbmira
from rerank.mira.pro import pro
from rerank.nbest import NBestList
from rerank.tuning import prepare
from tests.mira_helpers import joshua, list_with_reference


def one_best(nbest, w):
    from rerank.nbest import segment_argmax

    return [nbest.hyps[int(r)] for r in segment_argmax(nbest.features @ w, nbest.offsets)]


def test_fixed_gains_are_sentence_scores_times_mean_list_length():
    nbest = NBestList(np.array([0, 2, 3]), ["a b c", "a b", "x y z w"], np.array([[0.0], [1.0], [0.0]]), ["f"])
    data = prepare(nbest.with_feature("g", np.array([0.0, 1.0, 0.0])), [["a b c", "x y"]], metric="ter",
                   tokenize="none")
    gains = fixed_gains(data)
    # TER: "a b c" vs "a b c" = 0 edits; "a b" = 1 edit / 3; "x y z w" vs "x y" = 2 / 2; mean lengths 2.5 and 4
    np.testing.assert_allclose(gains[0], [0.0, -1 / 3 * 2.5])
    np.testing.assert_allclose(gains[1], [-1.0 * 4])


@pytest.mark.neural
@pytest.mark.parametrize("metric", ["chrf", "ter"])
def test_mira_and_pro_reach_the_reference_for_other_metrics(metric):
    nbest, refs = list_with_reference(n=10)   # sacrebleu's TER: sentences 10 and 11 alone take seconds
    data = prepare(nbest, refs, metric=metric, tokenize="none")
    best = 100.0 if metric == "chrf" else 0.0  # the reference itself is in every list
    for weights, score in ((r.weights, r.best_score) for r in (kbmira(data, seed=1, epochs=10), pro(data, seed=1))):
        picks = one_best(nbest, weights)
        assert picks == refs[0]
        corpus = sacrebleu.corpus_chrf(picks, refs) if metric == "chrf" else sacrebleu.corpus_ter(picks, refs)
        assert score == pytest.approx(corpus.score, abs=1e-9) and corpus.score == pytest.approx(best)


def test_mira_for_chrf_on_real_lists_scores_its_epochs_with_corpus_chrf():
    nbest, refs = joshua(0, 30)
    data = prepare(nbest, refs, metric="chrf", tokenize="none")
    res = kbmira(data, seed=1, epochs=5)
    assert [h["epoch"] for h in res.history] == [1, 2, 3, 4, 5]
    assert res.best_score == pytest.approx(sacrebleu.corpus_chrf(one_best(nbest, res.weights), refs).score, abs=1e-9)
    assert res.best_score == max(h["score"] for h in res.history)


def test_a_non_bleu_visit_moves_no_background():
    nbest, refs = list_with_reference(n=3)
    state = KBMira(prepare(nbest, refs, metric="chrf", tokenize="none"))
    before = state.bg.copy()
    for i in range(3):
        state.visit(i)
    np.testing.assert_array_equal(state.bg, before)
    assert state.n_updates > 0


def test_weight_shares_by_hand_and_the_degenerate_warning(tmp_path, capsys):
    from rerank.cli import main
    from rerank.tuning import degenerate, weight_shares

    nbest = NBestList(np.array([0, 2, 4]), ["a", "b", "c", "d"], np.array([[0.0, 1.0], [2.0, 1.5], [1.0, 0.0], [1.0, 2.0]]),
                      ["f", "g"])
    data = prepare(nbest, [["a", "c"]], tokenize="none")
    # spreads per list: f (2, 0) -> mean 1; g (0.5, 2) -> mean 1.25; influences |w| * spread: 0.5 * 1, 2 * 1.25
    shares = weight_shares(data, np.array([-0.5, 2.0]))
    assert shares == pytest.approx({"f": 0.5 / 3.0, "g": 2.5 / 3.0})
    assert degenerate(shares) is None and degenerate(shares, 0.8) == "g"
    assert degenerate({"f": 1.0}) is None  # one feature cannot be degenerate
    (tmp_path / "in.nbest").write_text("0 ||| a ||| f= 0 g= 1 ||| 0\n0 ||| b ||| f= 2 g= 1 ||| 0\n"
                                       "1 ||| c ||| f= 1 g= 1 ||| 0\n1 ||| d ||| f= 0 g= 1 ||| 0\n")
    (tmp_path / "ref").write_text("a\nc\n")
    (tmp_path / "init.json").write_text('{"f": -1, "g": 1}')  # g is constant in every list: f decides alone
    assert main(["tune", str(tmp_path / "in.nbest"), "-r", str(tmp_path / "ref"), "--epochs", "3",
                 "--init", str(tmp_path / "init.json"), "-o", str(tmp_path / "w.json"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "warning: the tuned weights are degenerate: f holds 100% of the weighted within-list spread" in err
