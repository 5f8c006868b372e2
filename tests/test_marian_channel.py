"""recipes.marian_channel: training resumes to the same model as an uninterrupted run, the saved
model loads through the users'-model backend, and `compare` tunes and reports both channels."""

import json
import os

import numpy as np
import pytest
import torch

from rerank.recipes import marian_channel as M

pytestmark = pytest.mark.neural

DATA = os.path.join(os.path.dirname(__file__), "data", "models")
TINY = ["--vocab-size", "300", "--d-model", "16", "--layers", "1", "--heads", "2", "--ffn", "32",
        "--batch-tokens", "600", "--warmup", "5", "--minutes", "0", "--threads", "1", "--log", "",
        "--train-src", os.path.join(DATA, "train.de"), "--train-tgt", os.path.join(DATA, "train.en")]


def train(out, *extra):
    val = ["--val-src", os.path.join(DATA, "train.de"), "--val-tgt", os.path.join(DATA, "train.en")]
    assert M.main(["train", "--out", str(out), *TINY, *val, *extra]) == 0
    return torch.load(os.path.join(out, "checkpoint.pt"), weights_only=True)


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    whole = train(tmp_path / "whole", "--max-steps", "6", "--val-every", "3")
    train(tmp_path / "parts", "--max-steps", "3", "--val-every", "3")
    parts = train(tmp_path / "parts", "--max-steps", "6", "--val-every", "3")
    assert json.loads(parts["state"])["step"] == json.loads(whole["state"])["step"] == 6
    for name, value in whole["model"].items():
        assert torch.equal(value, parts["model"][name]), name
    history = [json.load(open(tmp_path / d / "history.json"))["history"] for d in ("whole", "parts")]
    assert [h["val_nll"] for h in history[0]] == [h["val_nll"] for h in history[1]]


def test_the_saved_model_scores_through_the_backend_and_compare_reports(tmp_path, capsys):
    import rerank

    train(tmp_path / "run", "--max-steps", "4")
    shipped = os.path.join(os.path.dirname(rerank.__file__), "data", "multi30k")
    out = tmp_path / "compare"
    args = ["compare", "--model", str(tmp_path / "run" / "model"), "--out", str(out), "--text-dir", shipped,
            "--flavours", "optimised", "--nbest", "20", "--sentences", "12", "--runs", "1", "--epochs", "2",
            "--ar", "200", "--bootstrap", "0"]
    assert M.main(args) == 0
    study = json.load(open(out / "marian_channel.json"))
    res = study["lists"]["optimised 20-best"]
    assert [s for s in res["table"]["systems"] if "Marian" in s] == ["+ channel (Marian)", "+ channel + lm (Marian)"]
    nbest = rerank.read_nbest(str(out / "features" / "optimised.val.20best.gz"))
    channel, norm = nbest.column("channel_tf"), nbest.column("channel_tf_norm")
    assert np.all(channel < 0) and np.all(norm < 0) and np.all(channel <= norm + 1e-9)
    assert "+ channel + lm (Marian)" in capsys.readouterr().out
    shipped_list = rerank.read_nbest(os.path.join(shipped, "optimised.val.20best.gz")).select_sentences(range(12))
    for name in ("channel", "channel_norm", "lm", "nmt"):  # the shipped columns are kept as they were
        assert np.array_equal(nbest.column(name), shipped_list.column(name))
