"""`rerank embed train|eval|encode` end to end on the tiny Multi30k slice."""

import gzip
import json
import os

import numpy as np
import pytest

from rerank.embeddings.encoder import Encoder
from rerank.embeddings.evaluate import read_sts
from rerank.cli import main

pytestmark = pytest.mark.neural

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "embeddings", "multi30k")
STS = os.path.join(HERE, "data", "embeddings", "sts")



@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    cfg = d / "cfg.json"
    cfg.write_text(json.dumps({"preset": "small", "word_dim": 16, "hidden_dim": 24, "joint_dim": 24, "min_freq": 1,
                               "batch_size": 16, "max_steps": 4, "contrastive": "max", "select_images": 20}))
    assert main(["embed", "train", "--config", str(cfg), "--data-dir", DATA, "--out", str(d / "out"), "--threads", "1"]) == 0
    return str(d / "out" / "model.pt")


def test_eval_writes_reports_next_to_model(model, capsys):
    assert main(["embed", "eval", "--model", model, "--data-dir", DATA, "--sts-dir", STS]) == 0
    out = capsys.readouterr().out
    assert "Translation retrieval" in out and "not evaluated: text-only model" in out
    report = json.load(open(model[:-3] + ".eval.json"))
    assert report["uses_images"] is False and set(report["sts"]) == {"sts2014-images", "sts2015-images"}
    # Pearson r of 5 cos with the gold scores, recomputed here from the model's vectors
    s1, s2, gold = read_sts(os.path.join(STS, "sts2014-images.test.tsv"))
    enc = Encoder.load(model)
    pred = 5 * (enc.encode(s1, "en") * enc.encode(s2, "en")).sum(1).astype(np.float64)
    dp, dg = pred - pred.mean(), gold - gold.mean()
    r = (dp * dg).sum() / np.sqrt((dp ** 2).sum() * (dg ** 2).sum())
    # float32 vectors: the two computations may sum in another order (1e-6 apart on some BLAS builds)
    assert report["sts"]["sts2014-images"] == {"pearson": pytest.approx(r, abs=1e-5), "n": 20}
    assert os.path.exists(model[:-3] + ".eval.md")


def test_encode_matches_api(model, tmp_path):
    lines = ["A dog runs on the beach.", "Two men play football."]
    src = tmp_path / "s.txt.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    out = tmp_path / "v.npy"
    assert main(["embed", "encode", "--model", model, "--lang", "en", "--input", str(src), "--output", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out), Encoder.load(model).encode(lines, "en"))


def test_cli_errors(model, tmp_path, capsys):
    src = tmp_path / "s.txt"
    src.write_text("a dog\n\n")
    assert main(["embed", "encode", "--model", model, "--lang", "en", "--input", str(src), "--output", str(tmp_path / "x.npy")]) == 2
    assert "sentence 2 is empty" in capsys.readouterr().err
    assert main(["embed", "encode", "--model", model, "--lang", "cs", "--input", str(src), "--output", str(tmp_path / "x.npy")]) == 2
    assert "unknown language 'cs'" in capsys.readouterr().err
    assert main(["embed", "eval", "--model", str(tmp_path / "none.pt")]) == 2
    assert "model file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["embed", "train", "--config", str(bad), "--data-dir", DATA, "--out", str(tmp_path / "o")]) == 2
    assert "cannot read config" in capsys.readouterr().err
