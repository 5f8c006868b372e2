"""Backretrieval (seed 002): BkR and XLR ranks on a constructed case, CORR's Spearman against
scipy and pandas (ties included, sampled pairs), `rerank embed backretrieval` against the API,
and the refusals (row counts, dimensions, --parallel, languages, --k)."""

import json
import os

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import rankdata, spearmanr

from rerank.embeddings.backretrieval import average_ranks, backretrieval_ranks, corr, paired_ranks, recalls, spearman
from rerank.embeddings.encoder import Encoder
from tests.cli_helpers import run, write

pytestmark = pytest.mark.neural

HERE = os.path.dirname(__file__)
MODEL = os.path.join(os.path.dirname(HERE), "rerank", "data", "models", "mlmme-small.pt")
EN = ["A dog runs on the beach.", "Two men play football on grass.", "A woman rides a red bicycle.",
      "Children swim in a lake.", "An old man reads a newspaper."]
DE = ["Ein Hund läuft am Strand.", "Zwei Männer spielen Fußball auf dem Rasen.", "Eine Frau fährt ein rotes Fahrrad.",
      "Kinder schwimmen in einem See.", "Ein alter Mann liest eine Zeitung."]


def angles(*degrees):
    return np.array([[np.cos(np.radians(d)), np.sin(np.radians(d))] for d in degrees], dtype=np.float32)


def test_backretrieval_and_xlr_on_a_constructed_case():
    eye = np.eye(4, dtype=np.float32)
    src_text = eye                        # source i = e_i
    tgt_text = eye[[1, 0, 2, 3]]          # target 0 = e_1, target 1 = e_0: sources 0 and 1 retrieve each other's
    images = angles(0, 10, 90, 180)       # source image i = target image i
    ranks, retrieved = backretrieval_ranks(src_text, tgt_text, images, images)
    assert retrieved.tolist() == [1, 0, 2, 3]
    # source 0 gets image 1 (10 deg): source images by cosine: 1 (1), 0 (cos 10), 2, 3 -> its own is 2nd
    assert ranks.tolist() == [2, 2, 1, 1]
    assert recalls(ranks, [1, 5]) == {"r@1": 50.0, "r@5": 100.0}
    # XLR: target 0 is second for source 0 (target 1 scores 1, the others 0 = ties below it)
    assert paired_ranks(src_text, tgt_text).tolist() == [2, 2, 1, 1]
    # unnormalised inputs give the same ranks (cosines)
    assert backretrieval_ranks(3 * src_text, tgt_text, 5 * images, images)[0].tolist() == [2, 2, 1, 1]


def test_ties_in_the_text_retrieval_take_the_first_target():
    src = np.array([[1.0, 0.0]], dtype=np.float32)
    tgt = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    _, retrieved = backretrieval_ranks(src, tgt, angles(0), angles(0, 50, 90))
    assert retrieved.tolist() == [1]


def test_spearman_against_scipy_and_pandas_with_ties():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 6, size=300).astype(np.float64)          # many ties
    b = a + rng.integers(0, 4, size=300)
    np.testing.assert_allclose(average_ranks(torch.from_numpy(a)).numpy(), rankdata(a))
    assert spearman(torch.from_numpy(a), torch.from_numpy(b)) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert spearman(torch.from_numpy(a), torch.from_numpy(b)) == pytest.approx(
        pd.Series(a).corr(pd.Series(b), method="spearman"), abs=1e-12)


def test_corr_is_spearman_of_text_and_image_cosine_distances():
    rng = np.random.default_rng(0)
    st, tt = rng.normal(size=(7, 5)), rng.normal(size=(6, 5))
    si = rng.normal(size=(7, 4))
    ti = si[:6] + 0.3 * rng.normal(size=(6, 4))
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    text = (1 - unit(st) @ unit(tt).T).ravel()
    image = (1 - unit(si) @ unit(ti).T).ravel()
    got = corr(st.astype(np.float32), tt.astype(np.float32), si.astype(np.float32), ti.astype(np.float32))
    assert got["pairs"] == 42 and got["all_pairs"]
    assert got["spearman"] == pytest.approx(spearmanr(text, image).statistic, abs=1e-6)
    sampled = corr(st, tt, si, ti, max_pairs=20, seed=5)
    assert sampled["pairs"] == 20 and not sampled["all_pairs"]
    flat = np.random.default_rng(5).choice(42, size=20, replace=False)
    assert sampled["spearman"] == pytest.approx(spearmanr(text[flat], image[flat]).statistic, abs=1e-6)


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    si = rng.normal(size=(5, 6)).astype(np.float32)
    np.save(tmp_path / "src.npy", si)
    np.save(tmp_path / "tgt.npy", si + 0.1 * rng.normal(size=(5, 6)).astype(np.float32))
    np.save(tmp_path / "short.npy", si[:3])
    np.save(tmp_path / "wide.npy", rng.normal(size=(5, 7)).astype(np.float32))
    return {"src": write(tmp_path, "en.txt", "\n".join(EN) + "\n"), "tgt": write(tmp_path, "de.txt", "\n".join(DE) + "\n"),
            "si": str(tmp_path / "src.npy"), "ti": str(tmp_path / "tgt.npy"), "short": str(tmp_path / "short.npy"),
            "wide": str(tmp_path / "wide.npy"), "dir": tmp_path}


def argv(f, **over):
    a = {"--src": f["src"], "--src-lang": "en", "--src-images": f["si"], "--tgt": f["tgt"], "--tgt-lang": "de",
         "--tgt-images": f["ti"], **over}
    return ["embed", "backretrieval", "-m", MODEL, *[x for kv in a.items() for x in kv], "--threads", 1]


def test_cli_json_matches_the_api(files, capsys):
    code, out, _ = run(argv(files) + ["--parallel", "--k", "1,5,10", "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    enc = Encoder.load(MODEL)
    vs, vt = enc.encode(EN, "en"), enc.encode(DE, "de")
    si, ti = np.load(files["si"]), np.load(files["ti"])
    ranks, _ = backretrieval_ranks(vs, vt, si, ti)
    assert result["backretrieval"] == recalls(ranks, [1, 5, 10]) and set(result["xlr"]) == {"r@1", "r@5", "r@10"}
    assert result["xlr"] == recalls(paired_ranks(vs, vt), [1, 5, 10])
    assert result["corr"] == pytest.approx(corr(vs, vt, si, ti)["spearman"]) and result["corr_pairs"] == 25
    code, out, _ = run(argv(files), capsys)
    assert code == 0 and "| BkR |" in out and "XLR" not in out and "CORR" in out
    code, out, _ = run(argv(files) + ["--json"], capsys)
    assert list(json.loads(out)["backretrieval"]) == ["r@10"]   # the paper's K = 10 by default


@pytest.mark.parametrize("over,message", [
    ({"--src-images": "short"}, "short.npy: 3 feature rows, but --src"),
    ({"--tgt-images": "wide"}, "wide.npy: 7-d image features, but --src-images has 6"),
    ({"--tgt-lang": "fr"}, "language 'fr' is not in the model (it has en, de)"),
    ({"--src-images": "missing"}, "image feature file not found"),
])
def test_cli_refusals(files, capsys, over, message):
    over = {k: v if k.endswith("-lang") else files.get(v, str(files["dir"] / "nothing.npy")) for k, v in over.items()}
    code, _, err = run(argv(files, **over), capsys)
    assert code == 2 and "rerank embed: error: " in err and message in err


def test_parallel_needs_as_many_lines(files, capsys):
    short = write(files["dir"], "de3.txt", "\n".join(DE[:3]) + "\n")
    np.save(files["dir"] / "t3.npy", np.load(files["ti"])[:3])
    code, _, err = run(argv(files, **{"--tgt": short, "--tgt-images": str(files["dir"] / "t3.npy")}) + ["--parallel"], capsys)
    assert code == 2 and "de3.txt: --parallel: 3 lines, but --src has 5" in err
    assert run(argv(files, **{"--tgt": short, "--tgt-images": str(files["dir"] / "t3.npy")}), capsys)[0] == 0


def test_k_must_be_positive_integers(files, capsys):
    with pytest.raises(SystemExit):
        run(argv(files) + ["--k", "1,0"], capsys)
    assert "argument --k: '1,0': comma-separated positive integers" in capsys.readouterr().err
