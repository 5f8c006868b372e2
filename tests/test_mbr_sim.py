"""The cosine of a sentence-transformers encoder as the MBR utility (`--mbr-utility sim --mbr-model
DIR`, the plug-in rerank.embeddings.sentence_encoders.SimMBRUtility of the entry-point group
rerank.mbr_utilities), on a tiny random-weight encoder: exact MBR is the brute-force expectation of
sentence-transformers' own cosine similarity; for normalised embeddings the aggregate method equals
exact (the dot product is linear), also with candidate and reference limits; a model given to a
text utility, or none to sim, is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rerank import api, plugins
from rerank import consensus as C
from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import NBestList
from rerank.recipes import tiny_models

pytestmark = pytest.mark.neural

LISTS = [["Ein Mann fährt Fahrrad .", "Ein Mann fährt .", "Mann auf Rad", "Ein Mann fährt Fahrrad ."],
         ["Zwei Hunde rennen .", "Hunde laufen auf dem Gras .", "Zwei Hunde ."],
         ["Ein Kind ."]]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    torch.set_num_threads(1)
    tokenizer = tiny_models.train_tokenizer(tiny_models.read_text(tiny_models.DEFAULT_TEXT))
    return tiny_models.build_sentence_encoder(str(tmp_path_factory.mktemp("st") / "st"), tokenizer, seed=3)


@pytest.fixture(scope="module")
def nbest():
    feats = [np.array([[-0.4 * k] for k in range(len(h))]) for h in LISTS]
    return NBestList.from_lists(LISTS, feats, ["nmt"], [f[:, 0] for f in feats])


def test_sim_is_an_installed_mbr_utility():
    assert plugins.mbr_utilities()["sim"].__name__ == "SimMBRUtility" and "sim" in C.utility_names()


def test_exact_mbr_is_the_expectation_of_sentence_transformers_cosine(encoder, nbest):
    from sentence_transformers import SentenceTransformer

    utility = C.make_utility("sim", encoder, None)
    got = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("sim", temperature=0.8), model=utility)
    model = SentenceTransformer(encoder, device="cpu")
    hyps = list(nbest.hyps)
    similarity = model.similarity(model.encode(hyps), model.encode(hyps)).double().numpy()
    p = C.posterior(nbest.column("nmt"), nbest.offsets, 0.8)
    for a, b in zip(nbest.offsets[:-1].tolist(), nbest.offsets[1:].tolist()):
        for i in range(a, b):
            assert got[i] == pytest.approx(100 * sum(p[j] * similarity[i, j] for j in range(a, b)), abs=1e-4)


@pytest.mark.parametrize("limits", [{}, {"references": 2}, {"candidates": np.array([1, 1, 0, 0, 0, 1, 1, 1], bool)}])
def test_aggregate_equals_exact_for_normalised_embeddings(encoder, nbest, limits):
    utility = C.make_utility("sim", encoder, 2)
    scores = nbest.column("nmt")
    references, candidates = limits.get("references"), limits.get("candidates")
    exact = C.mbr_scores(nbest, scores, C.MBROptions("sim", references=references), model=utility, candidates=candidates)
    aggregate = C.mbr_scores(nbest, scores, C.MBROptions("sim", method="aggregate", references=references), model=utility,
                             candidates=candidates)
    np.testing.assert_allclose(aggregate, exact, atol=1e-9)


def test_the_feature_and_its_refusals(encoder, nbest, tmp_path, capsys):
    column = api.add_features(nbest, "mbr", mbr_utility="sim", mbr_model=encoder).column("mbr")
    expected = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("sim"), model=C.make_utility("sim", encoder, None))
    np.testing.assert_allclose(column, expected, atol=1e-12)
    with pytest.raises(InputError, match="the sim MBR utility needs its model"):
        api.add_features(nbest, "mbr", mbr_utility="sim")
    with pytest.raises(InputError, match="the chrf utility has none"):
        api.add_features(nbest, "mbr", mbr_utility="chrf", mbr_model=encoder)
    with pytest.raises(InputError, match="utility 'no-such-utility' is no MBR utility"):
        api.add_features(nbest, "mbr", mbr_utility="no-such-utility", mbr_model=encoder)
    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    assert main(["features", str(tmp_path / "in.nbest"), "--which", "mbr", "--mbr-utility", "sim", "--mbr-model",
                 encoder, "--mbr-method", "aggregate", "-o", str(tmp_path / "out.nbest")]) == 0
    np.testing.assert_allclose(api.read_nbest(str(tmp_path / "out.nbest")).column("mbr"), column, atol=1e-4)


def test_torchrun_splits_the_encoding_and_writes_what_one_process_writes(encoder, nbest, tmp_path):
    from tests.cli_helpers import torchrun

    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    args = ["features", tmp_path / "in.nbest", "--which", "mbr", "--mbr-utility", "sim", "--mbr-model", encoder,
            "--mbr-batch-size", "2", "--quiet"]
    ranks = torchrun([*args, "-o", tmp_path / "two.nbest"])
    assert ranks.returncode == 0, ranks.stderr[-2000:]
    assert main([str(a) for a in args] + ["-o", str(tmp_path / "one.nbest")]) == 0
    assert (tmp_path / "two.nbest").read_bytes() == (tmp_path / "one.nbest").read_bytes()


def test_the_mlmme_utility_is_the_expected_cosine_of_the_shipped_model(nbest):
    """mlmme: the cosine of the shipped MLMME model's German embeddings; exact = aggregate (linear)."""
    import os

    model = os.path.join(os.path.dirname(__file__), "..", "rerank", "data", "models", "mlmme-small.pt")
    utility = C.make_utility("mlmme", model, None)
    scores = nbest.column("nmt")
    exact = C.mbr_scores(nbest, scores, C.MBROptions("mlmme", temperature=0.8), model=utility)
    np.testing.assert_allclose(C.mbr_scores(nbest, scores, C.MBROptions("mlmme", temperature=0.8, method="aggregate"),
                                            model=utility), exact, atol=1e-9)
    # the utility's own encoder (numpy; its vectors are the torch Encoder's within 1e-6, which 100 x
    # the cosine would show: tests/test_embeddings_numpy.py)
    vectors = utility.encoder.encode(list(nbest.hyps), "de").astype(np.float64)
    p = C.posterior(scores, nbest.offsets, 0.8)
    for a, b in zip(nbest.offsets[:-1].tolist(), nbest.offsets[1:].tolist()):
        for i in range(a, b):
            assert exact[i] == pytest.approx(100 * sum(p[j] * vectors[i] @ vectors[j] for j in range(a, b)), abs=1e-6)
    with pytest.raises(InputError, match="not 'xx'"):
        C.make_utility("mlmme", model, None, api.FeatureContext(tgt_lang="xx"))
