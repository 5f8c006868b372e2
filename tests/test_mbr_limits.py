"""MBR candidates and pseudo-references (`--mbr-candidates NAME:K`, `--mbr-references K`), with
every utility and both methods: a candidate's value is the brute-force expectation over the top-K
pseudo-references with their posterior renormalised; candidates keep the values they have without
the limit when every row is a reference; non-candidates get their list's lowest candidate value
and the mbr_candidate column marks them; limits as large as the lists change nothing; TER scores
only the pairs it needs."""

from __future__ import annotations

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from rerank import api
from rerank import consensus as C
from rerank.errors import InputError
from rerank.nbest import NBestList

LISTS = [
    ["the cat sat on the mat .", "a cat sat on the mat .", "the cat is on the mat", "the the the cat", "cat mat"],
    ["Hello , world !", "hello world", "Hello world !"],
    ["only one"],
    ["3.5 km , 12-4", "3.5 km, 12 - 4", "", "km km km km km km"],
]
UTILITIES = ("bleu", "chrf", "ter")


@pytest.fixture(scope="module")
def nbest():
    rng = np.random.default_rng(0)
    feats = [np.column_stack([-np.arange(len(h), dtype=float) * 0.7, rng.normal(size=len(h))]) for h in LISTS]
    return NBestList.from_lists(LISTS, feats, ["nmt", "qe"], [f[:, 0] for f in feats])


def brute(nbest, utility, temperature, refs_k=None):
    """sum_j q_j U(h_i, h_j), q the posterior over each list's top refs_k rows, renormalised."""
    p = C.posterior(nbest.column("nmt"), nbest.offsets, temperature)
    hyps, out = list(nbest.hyps), np.zeros(nbest.n_hyps)
    for a, b in zip(nbest.offsets[:-1].tolist(), nbest.offsets[1:].tolist()):
        order = sorted(range(a, b), key=lambda j: (-p[j], j))
        refs = order[:refs_k] if refs_k else order
        total = sum(p[j] for j in refs)
        for i in range(a, b):
            for j in refs:
                if utility == "bleu":
                    u = BLEU(smooth_method="add-k", effective_order=True).sentence_score(hyps[i], [hyps[j]]).score
                elif utility == "chrf":
                    u = CHRF().sentence_score(hyps[i], [hyps[j]]).score
                else:
                    u = -TER().sentence_score(hyps[i], [hyps[j]]).score
                out[i] += p[j] / total * u
    return out


@pytest.mark.parametrize("utility", UTILITIES)
def test_references_are_the_top_k_by_posterior_renormalised(nbest, utility):
    got = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility, temperature=2.0, references=2))
    np.testing.assert_allclose(got, brute(nbest, utility, 2.0, refs_k=2), atol=1e-9)
    every = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility, temperature=2.0))
    assert np.array_equal(C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility, temperature=2.0, references=9)),
                          every)


# aggregate MBR has no TER (refused, tests/test_consensus_aggregate.py)
@pytest.mark.parametrize("utility,method", [(u, "exact") for u in UTILITIES] + [("bleu", "aggregate"),
                                                                               ("chrf", "aggregate")])
def test_candidates_keep_their_values_and_the_others_rank_last(nbest, utility, method):
    scores = nbest.column("nmt")
    every = C.mbr_scores(nbest, scores, C.MBROptions(utility, method=method))
    mask = C.top_rows(nbest.column("qe"), nbest.offsets, 2)
    got = C.mbr_scores(nbest, scores, C.MBROptions(utility, method=method), candidates=mask)
    np.testing.assert_allclose(got[mask], every[mask], atol=1e-12)
    for a, b in zip(nbest.offsets[:-1].tolist(), nbest.offsets[1:].tolist()):
        rows = np.arange(a, b)
        assert mask[rows].sum() == min(2, b - a)
        assert np.all(got[rows[~mask[rows]]] == got[rows[mask[rows]]].min())
        best = rows[np.argsort(-nbest.column("qe")[rows], kind="stable")[:2]]
        assert set(best.tolist()) == set(rows[mask[rows]].tolist())


def test_ter_scores_only_candidate_and_reference_pairs(nbest, monkeypatch):
    from rerank.metrics import ter

    seen = []
    original = ter.pair_ter
    monkeypatch.setattr(ter, "pair_ter", lambda texts, I, J: seen.append(len(I)) or original(texts, I, J))
    mask = C.top_rows(nbest.column("qe"), nbest.offsets, 1)
    C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("ter", references=2), candidates=mask)
    sizes = np.diff(nbest.offsets)
    assert seen == [int(np.minimum(sizes, 2).sum())]   # one candidate per list, times its references


def test_the_feature_options_and_the_candidate_column(nbest):
    out = api.add_features(nbest, ["mbr", "mbr_candidate"], mbr_candidates="qe:2", mbr_references=3,
                           mbr_utility="chrf")
    mask = C.top_rows(nbest.column("qe"), nbest.offsets, 2)
    assert np.array_equal(out.column("mbr_candidate"), mask.astype(float))
    expected = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("chrf", references=3), candidates=mask)
    assert np.array_equal(out.column("mbr"), expected)
    with pytest.raises(InputError, match="expected NAME:K"):
        api.add_features(nbest, "mbr", mbr_candidates="qe")
    with pytest.raises(InputError, match="no column 'comet'"):
        api.add_features(nbest, "mbr", mbr_candidates="comet:3")
    with pytest.raises(InputError, match="mbr_candidate needs the MBR candidates option"):
        api.add_features(nbest, "mbr_candidate")
    with pytest.raises(InputError, match="references must be a positive integer"):
        C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("bleu", references=0))
