"""COMET as the MBR utility (`--mbr-utility comet --mbr-comet-model PATH`, rerank.metrics.comet.MBRUtility)
on tiny random-weight checkpoints: exact MBR equals the brute-force expectation of COMET's own
`predict` over the list's pseudo-references, for the COMET-22-style regression model (each
hypothesis encoded once, the estimator on the pairs) and for XCOMET (COMET's predict per pair);
the aggregate method equals exact when the posterior sits on one hypothesis; candidate and
reference limits; clear refusals. unbabel-comet needs transformers 4: `make test-compat` runs
this file (tests/conftest.py names it elsewhere)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from rerank import api
from rerank import consensus as C
from rerank.cli import main
from rerank.errors import InputError
from rerank.metrics import comet
from rerank.nbest import NBestList
from rerank.recipes import tiny_models

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SOURCES = ["A man is riding a bike .", "Two dogs run on the grass .", "A child ."]
LISTS = [["Ein Mann fährt Fahrrad .", "Ein Mann fährt .", "Mann auf Rad", "Ein Mann fährt Fahrrad ."],
         ["Zwei Hunde rennen .", "Hunde laufen auf dem Gras .", "Zwei Hunde ."],
         ["Ein Kind ."]]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("comet")
    lines = tiny_models.read_text(tiny_models.DEFAULT_TEXT)
    return {kind: tiny_models.build_comet(str(root / kind), lines, seed=2, kind=kind)
            for kind in ("regression", "xcomet", "kiwi")}


@pytest.fixture(scope="module")
def nbest():
    feats = [np.array([[-0.5 * k] for k in range(len(h))]) for h in LISTS]
    return NBestList.from_lists(LISTS, feats, ["nmt"], [f[:, 0] for f in feats])


def brute(path, nbest, temperature, refs_k=None, candidates=None):
    """100 sum_j q_j COMET(src, h_i, h_j) with COMET's own predict, q the (top-K renormalised) posterior."""
    from comet import load_from_checkpoint

    model = load_from_checkpoint(comet.checkpoint_file(path), local_files_only=True)
    p = C.posterior(nbest.column("nmt"), nbest.offsets, temperature)
    hyps, out = list(nbest.hyps), np.zeros(nbest.n_hyps)
    for s, (a, b) in enumerate(zip(nbest.offsets[:-1].tolist(), nbest.offsets[1:].tolist())):
        refs = sorted(range(a, b), key=lambda j: (-p[j], j))[:refs_k]
        rows = [{"src": SOURCES[s], "mt": hyps[i], "ref": hyps[j]} for i in range(a, b) for j in refs]
        scores = np.asarray(model.predict(rows, batch_size=8, gpus=0, progress_bar=False, accelerator="cpu").scores)
        total = sum(p[j] for j in refs)
        for n, i in enumerate(range(a, b)):
            out[i] = 100 * sum(p[j] / total * scores[n * len(refs) + m] for m, j in enumerate(refs))
    return out


@pytest.mark.parametrize("kind", ["regression", "xcomet"])
def test_exact_mbr_is_the_expectation_of_comets_own_scores(models, nbest, kind):
    utility = comet.MBRUtility(models[kind], batch_size=3)
    got = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("comet", temperature=1.5), model=utility,
                       sources=SOURCES)
    np.testing.assert_allclose(got, brute(models[kind], nbest, 1.5), atol=1e-4)


def test_limits_with_comet(models, nbest):
    utility = comet.MBRUtility(models["regression"])
    mask = C.top_rows(-np.arange(nbest.n_hyps, dtype=float), nbest.offsets, 2)
    got = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("comet", references=2), model=utility, sources=SOURCES,
                       candidates=mask)
    expected = brute(models["regression"], nbest, 1.0, refs_k=2)
    np.testing.assert_allclose(got[mask], expected[mask], atol=1e-4)


def test_each_distinct_text_is_encoded_once(models, nbest, monkeypatch):
    seen = []
    original = comet.sentence_embeddings
    monkeypatch.setattr(comet, "sentence_embeddings", lambda m, texts, *a: seen.extend(texts) or original(m, texts, *a))
    utility = comet.MBRUtility(models["regression"])
    C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("comet"), model=utility, sources=SOURCES)
    assert sorted(seen) == sorted(set(nbest.hyps) | set(SOURCES))


def test_aggregate_equals_exact_when_the_posterior_sits_on_one_hypothesis(models, nbest):
    utility = comet.MBRUtility(models["regression"])
    scores = nbest.column("nmt")
    peaked = C.mbr_scores(nbest, scores, C.MBROptions("comet", temperature=1e-6, method="aggregate"), model=utility,
                          sources=SOURCES)
    exact = C.mbr_scores(nbest, scores, C.MBROptions("comet", temperature=1e-6), model=utility, sources=SOURCES)
    np.testing.assert_allclose(peaked, exact, atol=1e-4)
    spread = C.mbr_scores(nbest, scores, C.MBROptions("comet", method="aggregate"), model=utility, sources=SOURCES)
    assert np.all(np.isfinite(spread)) and not np.allclose(spread, peaked)
    with pytest.raises(InputError, match="aggregate MBR method needs a COMET model whose score is an estimator"):
        C.mbr_scores(nbest, scores, C.MBROptions("comet", method="aggregate"), model=comet.MBRUtility(models["xcomet"]),
                     sources=SOURCES)


def test_the_feature_and_its_refusals(models, nbest, tmp_path, capsys):
    column = api.add_features(nbest, "mbr", sources=SOURCES, mbr_utility="comet",
                              mbr_model=models["regression"]).column("mbr")
    np.testing.assert_allclose(column, brute(models["regression"], nbest, 1.0), atol=1e-4)
    with pytest.raises(InputError, match="the comet MBR utility needs its model"):
        api.add_features(nbest, "mbr", sources=SOURCES, mbr_utility="comet")
    with pytest.raises(InputError, match="needs one source sentence per list"):
        api.add_features(nbest, "mbr", mbr_utility="comet", mbr_model=models["regression"])
    with pytest.raises(InputError, match="the bleu utility has none"):
        api.add_features(nbest, "mbr", sources=SOURCES, mbr_model=models["regression"])
    with pytest.raises(InputError, match="a reference-free COMET model"):
        api.add_features(nbest, "mbr", sources=SOURCES, mbr_utility="comet", mbr_model=models["kiwi"])
    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    (tmp_path / "src").write_text("\n".join(SOURCES) + "\n")
    assert main(["features", str(tmp_path / "in.nbest"), "--src", str(tmp_path / "src"), "--which", "mbr",
                 "--mbr-utility", "comet", "--mbr-model", models["regression"], "--no-score-cache",
                 "-o", str(tmp_path / "out.nbest")]) == 0
    out = api.read_nbest(str(tmp_path / "out.nbest"))
    np.testing.assert_allclose(out.column("mbr"), column, atol=1e-4)   # the file's decimals


@pytest.mark.parametrize("method", ["exact", "aggregate"])
def test_torchrun_splits_the_encoding_and_writes_what_one_process_writes(models, nbest, tmp_path, method):
    from tests.cli_helpers import torchrun

    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    (tmp_path / "src").write_text("\n".join(SOURCES) + "\n")
    args = ["features", tmp_path / "in.nbest", "--src", tmp_path / "src", "--which", "mbr", "--mbr-utility", "comet",
            "--mbr-model", models["regression"], "--mbr-batch-size", "2", "--mbr-method", method, "--no-score-cache",
            "--quiet"]
    ranks = torchrun([*args, "-o", tmp_path / "two.nbest"])
    assert ranks.returncode == 0, ranks.stderr[-2000:]
    assert main([str(a) for a in args] + ["-o", str(tmp_path / "one.nbest")]) == 0
    assert (tmp_path / "two.nbest").read_bytes() == (tmp_path / "one.nbest").read_bytes()


def test_the_decoders_with_comet_at_their_limits_are_exact(models, nbest):
    """rerank.mbr_decoders with COMET-22: centroid with K at least the list size (each embedding its
    own centroid), probabilistic with ratio 1, pruning holding every pseudo-reference at once and
    c2f with K = N equal exact MBR; with XCOMET, probabilistic and pruning run COMET's predict on
    the pairs they ask for (exact at their limits too), centroid and c2f are refused in one line."""
    scores = nbest.column("nmt")
    limits = {"centroid": {"centroids": 4}, "probabilistic": {"sample_ratio": 1.0}, "pruning": {"pruning_schedule": [4]},
              "c2f": {"c2f_k": 4}}
    for kind in ("regression", "xcomet"):
        utility = comet.MBRUtility(models[kind])
        exact = C.mbr_scores(nbest, scores, C.MBROptions("comet"), model=utility, sources=SOURCES)
        for method, settings in limits.items():
            options = C.MBROptions("comet", method=method, **settings)
            if kind == "xcomet" and method in ("centroid", "c2f"):
                with pytest.raises(InputError, match="needs a COMET model whose score is an estimator"):
                    C.mbr_scores(nbest, scores, options, model=utility, sources=SOURCES)
                continue
            got = C.mbr_scores(nbest, scores, options, model=utility, sources=SOURCES)
            np.testing.assert_allclose(got, exact, atol=1e-4, err_msg=f"{kind} {method}")
    regression = comet.MBRUtility(models["regression"])
    one = C.mbr_scores(nbest, scores, C.MBROptions("comet", method="centroid", centroids=1), model=regression,
                       sources=SOURCES)
    assert np.all(np.isfinite(one)) and not np.allclose(one, exact)


def test_xcomet_c2f_is_refused_in_one_line_by_the_command_line(models, nbest, tmp_path, capsys):
    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    (tmp_path / "src").write_text("\n".join(SOURCES) + "\n")
    assert main(["features", str(tmp_path / "in.nbest"), "--src", str(tmp_path / "src"), "--which", "mbr",
                 "--mbr-utility", "comet", "--mbr-model", models["xcomet"], "--mbr-method", "c2f", "--no-score-cache",
                 "-o", str(tmp_path / "out.nbest")]) == 2
    err = capsys.readouterr().err.strip()
    assert "aggregate MBR method needs a COMET model whose score is an estimator" in err and len(err.splitlines()) == 1


def test_comets_matrix_is_read_for_its_model_and_sources_alone(tmp_path, monkeypatch):
    """COMET-22 (a tiny random-weight checkpoint) as the utility: the second run, at another
    temperature, runs no model; c2f reads its pairs there (its aggregate step still runs the
    model); other sources (the digest of each list holds its source) are refused."""
    from tests.test_mbr_matrix import LISTS, make

    torch.set_num_threads(1)
    model = tiny_models.build_comet(str(tmp_path / "c"), tiny_models.read_text(tiny_models.DEFAULT_TEXT), seed=2,
                                    kind="regression")
    nbest, folder = make([hyps for hyps in LISTS if hyps]), str(tmp_path / "m")
    sources = [f"source {k} ." for k in range(nbest.n_sentences)]

    def run(srcs=sources, **options):
        return C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("comet", **options),
                            model=comet.MBRUtility(model), sources=srcs)

    expected = run(temperature=0.5)
    np.testing.assert_array_equal(run(matrix=folder), run())
    # c2f's pairs from the exact method's estimator, not from its own embeddings: equal to float32
    # rounding (the estimator runs in float32 on other batches; scores are x100: 1.1e-7 relative seen)
    np.testing.assert_allclose(run(method="c2f", c2f_k=2, matrix=folder), run(method="c2f", c2f_k=2),
                               rtol=1e-6, atol=1e-9)
    monkeypatch.setattr(comet.MBRUtility, "model", lambda self: (_ for _ in ()).throw(AssertionError("ran")))
    np.testing.assert_array_equal(run(temperature=0.5, matrix=folder), expected)
    with pytest.raises(InputError, match="list 1's texts are not those of the utility matrix"):
        run(["another source ."] + sources[1:], matrix=folder)
