"""The approximate MBR decoders (`--mbr-method centroid|probabilistic|pruning|c2f`,
rerank.mbr_decoders) at their limits equal exact MBR: centroid with K at least the list size,
probabilistic with a sample ratio of 1, pruning whose first step holds every pseudo-reference,
c2f with K at least the list size, for the text utilities (TER's lower-is-better direction
included) and a utility of fixed unit vectors, with candidate and pseudo-reference limits. Their
own properties: c2f keeps the aggregate method's K best with their exact values and puts the
others strictly below; the hypotheses pruning keeps to a step holding every pseudo-reference have
their exact values; centroid with one centroid is the cosine with the list's posterior-weighted
mean direction; a seed makes every run repeatable and independent of the blocks; the refusals
are one line, exit 2, from the command line. The sim utility on a tiny random encoder runs the
same properties end to end (neural)."""

from __future__ import annotations

import numpy as np
import pytest

from rerank import api
from rerank import consensus as C
from rerank import mbr_decoders as D
from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import NBestList
from rerank.options import make_options

WORDS = "a man dog runs the on grass child bike rides red blue big small".split()


def make_lists(sizes=(12, 7, 1, 20, 5), seed=0):
    """Lists of perturbed copies of one sentence each (duplicates included), nmt scores descending."""
    rng = np.random.default_rng(seed)
    lists = []
    for n in sizes:
        base = list(rng.choice(WORDS, 7))
        out = []
        for _ in range(n):
            words = list(base)
            for _ in range(int(rng.integers(0, 4))):
                words[int(rng.integers(len(words)))] = str(rng.choice(WORDS))
            out.append(" ".join(words[:int(rng.integers(3, 8))]))
        lists.append(out)
    feats = [np.sort(rng.normal(size=(len(h), 1)), axis=0)[::-1] for h in lists]
    return NBestList.from_lists(lists, feats, ["nmt"], [f[:, 0] for f in feats])


class FixedVectors(C.VectorUtility):
    """A utility of embeddings without a model file: each text's bag of words, L2-normalised."""

    def __init__(self, path=None, batch_size=None, device=None, cache=None, lang=None):
        pass

    def vectors(self, texts):
        out = np.zeros((len(texts), len(WORDS)))
        for i, text in enumerate(texts):
            for w in text.split():
                out[i, WORDS.index(w)] += 1
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture
def fixed(monkeypatch):
    monkeypatch.setitem(C.MBR_UTILITIES.table(), "fixed", FixedVectors)
    return FixedVectors()


@pytest.fixture(scope="module")
def nbest():
    return make_lists()


def limits(nbest, which):
    """(candidates, references) of a limit case."""
    if which == "candidates":
        return C.top_rows(-np.arange(nbest.n_hyps, dtype=float), np.asarray(nbest.offsets), 4), None
    return (None, 3) if which == "references" else (None, None)


def scores(nbest, utility, method="exact", model=None, candidates=None, **options):
    return C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility, temperature=options.pop("temperature", 2.0),
                                                                 method=method, **options),
                        model=model, candidates=candidates)


def assert_exact_where_kept(got, exact, kept, offsets):
    """The `kept` rows' values equal exact MBR's; every other row is strictly below its list's kept rows."""
    kept = np.ones(len(got), dtype=bool) if kept is None else kept
    np.testing.assert_allclose(got[kept], exact[kept], rtol=0, atol=1e-9)
    group = C.list_of_row(np.asarray(offsets))
    for l in np.unique(group[~kept]):
        assert got[~kept & (group == l)].max() < got[kept & (group == l)].min()


@pytest.mark.parametrize("limit", ["none", "candidates", "references"])
@pytest.mark.parametrize("utility", ["bleu", "chrf", "ter"])
def test_probabilistic_with_ratio_1_and_pruning_holding_every_reference_at_once_are_exact(nbest, utility, limit):
    candidates, references = limits(nbest, limit)
    exact = scores(nbest, utility, candidates=candidates, references=references)
    for method, settings in (("probabilistic", {"sample_ratio": 1.0}), ("pruning", {"pruning_schedule": [20]}),
                             ("pruning", {"pruning_schedule": [25, 50]})):
        got = scores(nbest, utility, method, candidates=candidates, references=references, **settings)
        assert_exact_where_kept(got, exact, candidates, nbest.offsets)


@pytest.mark.parametrize("limit", ["none", "candidates", "references"])
@pytest.mark.parametrize("utility", ["bleu", "chrf"])
def test_c2f_with_k_as_large_as_the_lists_is_exact_bit_for_bit(nbest, utility, limit):
    candidates, references = limits(nbest, limit)
    exact = scores(nbest, utility, candidates=candidates, references=references)
    got = scores(nbest, utility, "c2f", candidates=candidates, references=references, c2f_k=20)
    kept = np.ones(len(got), dtype=bool) if candidates is None else candidates
    np.testing.assert_array_equal(got[kept], exact[kept])
    assert_exact_where_kept(got, exact, candidates, nbest.offsets)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_c2f_keeps_the_aggregate_top_k_with_their_exact_values(nbest, k):
    offsets = np.asarray(nbest.offsets)
    aggregate, exact = scores(nbest, "chrf", "aggregate"), scores(nbest, "chrf")
    top = C.top_rows(aggregate, offsets, k)
    assert_exact_where_kept(scores(nbest, "chrf", "c2f", c2f_k=k), exact, top, offsets)


@pytest.mark.parametrize("limit", ["none", "candidates", "references"])
def test_centroid_with_k_at_least_the_pseudo_references_is_exact(nbest, fixed, limit):
    candidates, references = limits(nbest, limit)
    exact = scores(nbest, "fixed", model=fixed, candidates=candidates, references=references)
    got = scores(nbest, "fixed", "centroid", model=fixed, candidates=candidates, references=references, centroids=20)
    assert_exact_where_kept(got, exact, candidates, nbest.offsets)


def test_one_centroid_is_the_cosine_with_the_posterior_weighted_mean_direction(nbest, fixed):
    got = scores(nbest, "fixed", "centroid", model=fixed, centroids=1)
    p = C.posterior(nbest.column("nmt"), nbest.offsets, 2.0)
    vectors = fixed.vectors(list(nbest.hyps))
    for a, b in zip(nbest.offsets[:-1].tolist(), nbest.offsets[1:].tolist()):
        mean = p[a:b] @ vectors[a:b]
        np.testing.assert_allclose(got[a:b], 100 * vectors[a:b] @ (mean / np.linalg.norm(mean)), rtol=0, atol=1e-9)


def test_the_hypotheses_pruning_keeps_have_their_exact_values(nbest):
    """With a schedule whose last step holds every pseudo-reference, each hypothesis that is not
    pruned is scored against all of them: its value is exact MBR's, and the pruned are below."""
    for utility in ("chrf", "ter"):
        exact = scores(nbest, utility, temperature=5.0)
        got = scores(nbest, utility, "pruning", temperature=5.0, pruning_schedule=[2, 4, 8, 100], pruning_alpha=0.5)
        group = C.list_of_row(np.asarray(nbest.offsets))
        kept = np.zeros(len(got), dtype=bool)
        for l in range(nbest.n_sentences):
            rows = group == l
            kept |= rows & (got > got[rows].min())
            kept |= rows & (got == got[rows].max())
        np.testing.assert_allclose(got[kept], exact[kept], rtol=0, atol=1e-9)
        assert not kept.all()   # with alpha 0.5 some are pruned on these lists


def test_the_decoders_maximise_the_oriented_utility_for_ter(nbest):
    """TER's utility is minus TER: every decoder at its exact limit picks the lowest expected TER."""
    exact = scores(nbest, "ter")
    for method, settings in (("probabilistic", {"sample_ratio": 1.0}), ("pruning", {"pruning_schedule": [64]})):
        got = scores(nbest, "ter", method, **settings)
        for a, b in zip(nbest.offsets[:-1].tolist(), nbest.offsets[1:].tolist()):
            assert exact[a + int(np.argmax(got[a:b]))] == exact[a:b].max()
    assert np.all(exact <= 0)


@pytest.mark.parametrize("method, settings", [("probabilistic", {"sample_ratio": 0.3}), ("pruning", {}),
                                              ("centroid", {"centroids": 3})])
def test_a_seed_makes_a_run_repeatable_and_independent_of_the_blocks(method, settings, fixed):
    nbest = make_lists((30, 24, 40, 9), seed=3)
    utility, model = ("fixed", fixed) if method == "centroid" else ("chrf", None)
    runs = {seed: scores(nbest, utility, method, model=model, seed=seed, **settings) for seed in (0, 1, 2, 3)}
    np.testing.assert_array_equal(scores(nbest, utility, method, model=model, seed=2, **settings), runs[2])
    blocks = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(utility, temperature=2.0, method=method, seed=2,
                                                                  **settings), model=model, block_pairs=1)
    np.testing.assert_array_equal(blocks, runs[2])
    assert any(not np.array_equal(runs[0], runs[s]) for s in (1, 2, 3))
    assert np.all(np.isfinite(runs[0]))


def test_the_approximations_are_close_on_larger_lists():
    """Not a limit: on lists of 64, a quarter of the pairs completed at rank 8 and the default pruning
    schedule keep most of exact MBR's expected utility for the chosen hypothesis."""
    nbest = make_lists((64, 64, 64), seed=5)
    exact = scores(nbest, "chrf", temperature=5.0)
    for method, settings in (("probabilistic", {"sample_ratio": 0.25}), ("pruning", {}), ("c2f", {"c2f_k": 8})):
        got = scores(nbest, "chrf", method, temperature=5.0, **settings)
        for a, b in zip(nbest.offsets[:-1].tolist(), nbest.offsets[1:].tolist()):
            chosen = exact[a + int(np.argmax(got[a:b]))]
            assert chosen >= exact[a:b].max() - 0.25 * (exact[a:b].max() - exact[a:b].min())


def test_weighted_kmeans_finds_separate_clusters_with_their_weighted_means_and_mass():
    rng = np.random.default_rng(0)
    blobs = [c + 0.01 * rng.normal(size=(12, 5)) for c in np.eye(5)[:3] * 10]
    X, w = np.concatenate(blobs), rng.random(36) + 0.1
    for seed in range(5):
        centres, mass = D.weighted_kmeans(X, w, 3, np.random.default_rng(seed))
        assert len(centres) == 3
        for blob in range(3):
            weights = w[12 * blob:12 * blob + 12]
            owner = int(np.argmin(D.squared_distances(blobs[blob][:1], centres)[0]))
            np.testing.assert_allclose(centres[owner], weights @ blobs[blob] / weights.sum(), atol=1e-12)
            assert mass[owner] == pytest.approx(weights.sum())
    duplicate = np.repeat(X[:2], 5, axis=0)
    centres, mass = D.weighted_kmeans(duplicate, np.ones(10), 4, rng)
    assert len(centres) == 2 and sorted(mass.tolist()) == [5.0, 5.0]


def test_als_recovers_a_low_rank_matrix_from_a_sample():
    rng = np.random.default_rng(1)
    M = rng.random((60, 2)) @ rng.random((2, 50))
    observed = rng.random(M.shape) < 0.5
    completed = D.als_complete(M, observed, 2, rng)
    assert np.abs(completed - M)[~observed].mean() < 0.1 * np.abs(M).mean()


def test_the_library_refuses_what_a_decoder_does_not_allow(nbest, fixed):
    with pytest.raises(InputError, match="method centroid clusters the pseudo-references' embeddings; the bleu "
                                         "utility scores texts"):
        scores(nbest, "bleu", "centroid")
    with pytest.raises(InputError, match="method c2f ranks by the aggregate MBR method first, and the aggregate MBR "
                                         "method needs an n-gram utility"):
        scores(nbest, "ter", "c2f")
    with pytest.raises(InputError, match="^centroids is for the centroid MBR method, and the method is exact"):
        scores(nbest, "bleu", centroids=4)
    with pytest.raises(InputError, match="^seed is for the centroid, probabilistic and pruning MBR methods, and the method is c2f"):
        scores(nbest, "bleu", "c2f", seed=3)
    with pytest.raises(InputError, match="^pruning_schedule must grow step by step, got 8,8"):
        scores(nbest, "bleu", "pruning", pruning_schedule=[8, 8])
    with pytest.raises(InputError, match="'sample_ratio' of MBROptions must be a number in \\(0, 1\\]"):
        make_options(C.MBROptions, {"method": "probabilistic", "sample_ratio": 0.0})


@pytest.mark.parametrize("args, message", [
    (["--mbr-method", "centroid"], "--mbr-method centroid clusters the pseudo-references' embeddings; the bleu utility"),
    (["--mbr-method", "centroid", "--mbr-utility", "ter"], "the ter utility scores texts"),
    (["--mbr-method", "c2f", "--mbr-utility", "ter"], "--mbr-method c2f ranks by the aggregate MBR method first"),
    (["--mbr-centroids", "4"], "--mbr-centroids is for the centroid MBR method, and the method is exact"),
    (["--mbr-method", "pruning", "--mbr-pruning-schedule", "16,8"], "--mbr-pruning-schedule must grow step by step, got 16,8"),
    (["--mbr-method", "probabilistic", "--mbr-sample-ratio", "1.5"],
     "argument --mbr-sample-ratio: must be a number in (0, 1], got 1.5"),
])
def test_the_command_line_refuses_in_one_line(nbest, tmp_path, capsys, args, message):
    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    try:
        status = main(["features", str(tmp_path / "in.nbest"), "--which", "mbr", *args, "-o", str(tmp_path / "out")])
    except SystemExit as stop:   # argparse's refusal of a flag's value
        status = stop.code
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_the_command_line_runs_each_decoder(nbest, tmp_path):
    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    for method, args in (("c2f", ["--mbr-c2f-k", "3"]), ("pruning", ["--mbr-pruning-schedule", "2,4", "--mbr-seed", "4"]),
                         ("probabilistic", ["--mbr-sample-ratio", "0.5", "--mbr-rank", "2"])):
        out = str(tmp_path / f"{method}.nbest")
        assert main(["features", str(tmp_path / "in.nbest"), "--which", "mbr", "--mbr-utility", "chrf",
                     "--mbr-temperature", "2", "--mbr-method", method, *args, "-o", out, "--quiet"]) == 0
        options = {"c2f": {"c2f_k": 3}, "pruning": {"pruning_schedule": [2, 4], "seed": 4},
                   "probabilistic": {"sample_ratio": 0.5, "rank": 2}}[method]
        np.testing.assert_allclose(api.read_nbest(out).column("mbr"), scores(nbest, "chrf", method, **options),
                                   rtol=0, atol=1e-9)


@pytest.mark.neural
def test_sim_on_a_tiny_encoder(tmp_path_factory, tmp_path):
    """The sim utility (a sentence-transformers encoder with random weights): centroid with K at
    least the list size and the other decoders at their limits equal exact MBR; centroid through
    the command line."""
    import torch

    from rerank.recipes import tiny_models

    torch.set_num_threads(1)
    tokenizer = tiny_models.train_tokenizer(tiny_models.read_text(tiny_models.DEFAULT_TEXT))
    encoder = tiny_models.build_sentence_encoder(str(tmp_path_factory.mktemp("st") / "st"), tokenizer, seed=3)
    nbest = make_lists((6, 4, 1))
    utility = C.make_utility("sim", encoder, None)
    exact = scores(nbest, "sim", model=utility)
    for method, settings in (("centroid", {"centroids": 6}), ("probabilistic", {"sample_ratio": 1.0}),
                             ("pruning", {"pruning_schedule": [6]}), ("c2f", {"c2f_k": 6})):
        np.testing.assert_allclose(scores(nbest, "sim", method, model=utility, **settings), exact, rtol=0, atol=1e-9)
    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    assert main(["features", str(tmp_path / "in.nbest"), "--which", "mbr", "--mbr-utility", "sim", "--mbr-model",
                 encoder, "--mbr-temperature", "2", "--mbr-method", "centroid", "--mbr-centroids", "2",
                 "-o", str(tmp_path / "out.nbest"), "--quiet"]) == 0
    np.testing.assert_allclose(api.read_nbest(str(tmp_path / "out.nbest")).column("mbr"),
                               scores(nbest, "sim", "centroid", model=utility, centroids=2), rtol=0, atol=1e-9)


@pytest.mark.parametrize("utility", ["bleu", "chrf", "ter"])
def test_the_pair_scorer_gives_the_utilitys_own_values_in_tiles_or_not(utility):
    """PairScorer asks a text utility for some pairs alone: in tiles where that is cheaper (a few
    hypotheses against many pseudo-references, as c2f and pruning ask) or on the rows they hold;
    either way each pair's value is the utility's own for the whole lists."""
    nbest = make_lists((40, 33, 3), seed=7)
    texts, offsets = list(nbest.hyps), np.asarray(nbest.offsets)
    group = C.list_of_row(offsets)
    model = C.MBR_UTILITIES.get(utility)()
    every_I, every_J, _ = C.pair_index(offsets)
    every = model.exact(None, texts, group, every_I, every_J)
    scorer = D.PairScorer(model, None, texts, group)
    rng = np.random.default_rng(0)
    for share in (0.05, 0.2, 1.0):   # rectangles: some hypotheses of each list against all of its rows
        hyps = rng.random(len(texts)) < share
        keep = hyps[every_I]
        tiles = scorer.tiles(every_I[keep], every_J[keep])
        np.testing.assert_array_equal(scorer(every_I[keep], every_J[keep]), every[keep])
        if share < 1:
            assert tiles[0] < int((np.diff(offsets) ** 2).sum())   # the tiles cost less than the lists' squares
    sparse = rng.random(len(every_I)) < 0.1   # scattered pairs: the rows they hold
    np.testing.assert_array_equal(scorer(every_I[sparse], every_J[sparse]), every[sparse])


@pytest.mark.parametrize("sizes", [(5, 5, 5), (1, 6, 3, 0, 4)], ids=["one-size", "mixed"])
def test_a_vector_utilitys_exact_sum_is_the_sum_over_its_pairs(fixed, sizes):
    """Exact MBR with a vector utility reads each list's Gram matrix times its posterior
    (VectorUtility.expected_exact) instead of the generic pairs: the same sums, to rounding, with
    posteriors that are 0 for some rows (no pseudo-references)."""
    nb = make_lists(sizes=[s for s in sizes if s], seed=4)
    offsets = np.asarray(nb.offsets, dtype=np.int64)
    texts = list(nb.hyps)
    p = C.posterior(nb.column("nmt"), offsets, 1.0)
    p[::3] = 0.0
    I, J, _ = C.pair_index(offsets)
    generic = C.expected_utility(fixed.exact(None, texts, C.list_of_row(offsets), I, J), I, p[J], len(texts))
    np.testing.assert_allclose(fixed.expected_exact(None, texts, offsets, p), generic, rtol=1e-12, atol=1e-14)


def test_a_vector_utilitys_pairs_against_references_are_their_dot_products(fixed):
    """VectorUtility.against takes one product per list of the pairs' rows: the dot product of
    every pair (I, K) asked, in any order, repeats and pairs across lists included."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(30, 6))
    references = rng.normal(size=(9, 6))
    group = np.repeat(np.arange(4), [5, 10, 1, 14])
    I = rng.integers(0, 30, size=200)
    K = rng.integers(0, 9, size=200)
    expected = np.einsum("ij,ij->i", vectors[I], references[K])
    np.testing.assert_allclose(fixed.against(None, group, vectors, I, references, K), expected, rtol=1e-12, atol=1e-14)
    assert fixed.against(None, group, vectors, I[:0], references, K[:0]).shape == (0,)
